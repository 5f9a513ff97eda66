/**
 * The data plane's REPLICA_BASE_CONCURRENCY default (apps/dataplane/src/env.ts): requests one replica
 * takes at once, times the entry's Concurrency multiplier. Keep the two equal; a deployment whose nodes
 * run another value sets autoscaling.targetConcurrency explicitly.
 */
export const DEFAULT_REPLICA_BASE_CONCURRENCY = 32;

/**
 * Requests per replica the autoscaler aims at: the deployment's own, or the data plane's per-replica
 * gate (base x the entry's Concurrency multiplier, as apps/dataplane/src/limits computes it).
 */
export function resolveTargetConcurrency(
  d: { readonly targetConcurrency: number | null; readonly entryConcurrency: number | null },
  baseConcurrency: number = DEFAULT_REPLICA_BASE_CONCURRENCY,
): number {
  return d.targetConcurrency ?? Math.max(1, Math.floor(baseConcurrency * (d.entryConcurrency ?? 1)));
}
