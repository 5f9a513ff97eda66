import type { ReplicaLoad } from './replica-scraper.ts';
import type { RoutingSettings } from './routing-settings.ts';

export interface ScoreInput {
  readonly id: string;
  /** This node's requests in flight on the replica now (always fresh). */
  readonly inFlight: number;
  /** The replica's last scrape (fresh). */
  readonly load: ReplicaLoad;
  /** Share (0..1) of the prompt's blocks the replica is believed to hold. */
  readonly prefixMatch: number;
}

export interface Scored {
  readonly id: string;
  readonly score: number;
  readonly prefixMatch: number;
  /** Estimated requests on the replica now (running plus waiting). */
  readonly load: number;
  readonly kv: number;
  readonly inFlight: number;
}

/**
 * Scores replicas, higher is better:
 *   prefixWeight x prefix match (0..1)
 * - queueWeight x (load - lightest load) / (lightest load + 1)
 * - kvWeight x KV-cache use (0..1).
 * Load is the runtime's running plus waiting at the last scrape, plus what this node sent it since (its in-flight
 * count then and now), so a burst between two scrapes does not all land on one replica. The queue term is not
 * bounded: a replica a hot prefix overloads loses its affinity once it carries a few times the lightest one's load.
 */
export function scoreReplicas(inputs: readonly ScoreInput[], s: RoutingSettings): Scored[] {
  const loads = inputs.map((x) => Math.max(x.inFlight, x.load.running + x.load.waiting + x.inFlight - x.load.inFlightAtScrape));
  const min = Math.min(...loads);
  return inputs.map((x, i) => {
    const load = loads[i]!;
    const kv = x.load.kvUsage ?? 0;
    const score = s.prefixWeight * x.prefixMatch - s.queueWeight * ((load - min) / (min + 1)) - s.kvWeight * kv;
    return { id: x.id, score, prefixMatch: x.prefixMatch, load, kv, inFlight: x.inFlight };
  });
}
