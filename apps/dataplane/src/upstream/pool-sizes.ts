import type { ConfigView } from '../config/config-view.ts';
import { targetCapacity } from '../limits/limits.ts';

/** Connections beyond the admitted requests (a margin; health probes and metrics scrapes have a small undici pool of their own). */
const HEADROOM = 4;

/**
 * Connections each origin needs so that no request the limits admit waits for one: the sum, over the targets an
 * origin serves, of what the node admits to each (REPLICA_BASE_CONCURRENCY x Concurrency x replicas; a target's
 * requests may all land on one replica when the others are ejected or hold its prefixes). The chat pool (h1-pool.ts)
 * opens sockets on demand, so a large cap costs nothing until it is used.
 */
export function poolSizes(view: ConfigView, baseConcurrency: number): Map<string, number> {
  const sizes = new Map<string, number>();
  const add = (t: {
    readonly limits: { readonly concurrency: number | null };
    readonly upstreams: readonly { readonly origin: string }[];
    readonly replicaConcurrency?: number | null;
  }): void => {
    const cap = targetCapacity(baseConcurrency, t.limits.concurrency, t.upstreams.length, t.replicaConcurrency ?? null);
    for (const origin of new Set(t.upstreams.map((u) => u.origin))) sizes.set(origin, (sizes.get(origin) ?? HEADROOM) + cap);
  };
  for (const t of view.endpointByName.values()) add(t);
  for (const t of view.deploymentByTenantAndName.values()) add(t);
  return sizes;
}
