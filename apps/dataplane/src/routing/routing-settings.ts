import type { SnapshotRouting } from '@infer/shared';

export const routingPolicies = ['scorer', 'least_in_flight', 'round_robin', 'random'] as const;
export type RoutingPolicyName = (typeof routingPolicies)[number];

/** How one target picks among its replicas (the node's defaults, overridden per catalog entry or deployment). */
export interface RoutingSettings {
  readonly policy: RoutingPolicyName;
  /** Weight of the prompt share a replica would have to prefill (1 - its believed prefix match). */
  readonly prefixWeight: number;
  /** Weight of queue depth: requests waiting there plus pending prefill work, in prompts like this one. */
  readonly queueWeight: number;
  /** Weight of KV-cache use (0..1). */
  readonly kvWeight: number;
  /** A replica with this many requests waiting is saturated. */
  readonly queueThreshold: number;
  /** A replica with this KV-cache use (0..1) is saturated. */
  readonly kvThreshold: number;
}

export const defaultRoutingSettings: RoutingSettings = Object.freeze({
  policy: 'scorer',
  prefixWeight: 1,
  queueWeight: 1,
  kvWeight: 1,
  queueThreshold: 32,
  kvThreshold: 0.98,
});

/** The node's defaults with a target's overrides (fields it leaves out keep the default). */
export function mergeRouting(base: RoutingSettings, over: SnapshotRouting | null | undefined): RoutingSettings {
  if (over === null || over === undefined) return base;
  return Object.freeze({
    policy: over.policy ?? base.policy,
    prefixWeight: over.prefixWeight ?? base.prefixWeight,
    queueWeight: over.queueWeight ?? base.queueWeight,
    kvWeight: over.kvWeight ?? base.kvWeight,
    queueThreshold: over.queueThreshold ?? base.queueThreshold,
    kvThreshold: over.kvThreshold ?? base.kvThreshold,
  });
}
