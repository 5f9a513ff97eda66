import type { ReplicaLoad } from './replica-scraper.ts';
import type { RoutingSettings } from './routing-settings.ts';

export interface ScoreInput {
  readonly id: string;
  /** This node's requests in flight on the replica now (ties). */
  readonly inFlight: number;
  /** Prompt blocks this node sent the replica that it has not prefilled yet (no first byte), uncached ones only. */
  readonly pendingPrefillBlocks: number;
  /** The replica's last scrape (fresh). */
  readonly load: ReplicaLoad;
  /** Share (0..1) of the prompt's blocks the replica is believed to hold. */
  readonly prefixMatch: number;
}

export interface Scored {
  readonly id: string;
  readonly score: number;
  readonly prefixMatch: number;
  /** The queue term: prompts like this one ahead of it (waiting requests plus pending prefill work). */
  readonly queue: number;
  readonly kv: number;
  readonly inFlight: number;
}

/**
 * Scores replicas, higher is better, as an estimate of the time to first token in units of "one prefill of this
 * prompt":
 *   - prefixWeight x (1 - prefix match)   the part of this prompt the replica would have to prefill
 *   - queueWeight x queue                 work ahead of it: requests waiting there (vLLM's queue, every node's)
 *                                         plus the uncached prompt blocks this node sent it that are still being
 *                                         prefilled, over this prompt's blocks (fresh, so a burst between two
 *                                         scrapes spreads)
 *   - kvWeight x KV-cache use             a full cache makes new requests wait for memory.
 * Decoding requests barely delay a first token; they show in KV use. A replica a hot prefix overloads loses it
 * once the work queued there costs more than prefilling the prompt elsewhere.
 */
export function scoreReplicas(inputs: readonly ScoreInput[], promptBlocks: number, s: RoutingSettings): Scored[] {
  const n = Math.max(1, promptBlocks);
  return inputs.map((x) => {
    const queue = x.load.waiting + x.pendingPrefillBlocks / n;
    const kv = x.load.kvUsage ?? 0;
    const score = -(s.prefixWeight * (1 - x.prefixMatch) + s.queueWeight * queue + s.kvWeight * kv);
    return { id: x.id, score, prefixMatch: x.prefixMatch, queue, kv, inFlight: x.inFlight };
  });
}
