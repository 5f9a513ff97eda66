/**
 * An approximate map of which replica holds which prompt prefix, learned from this node's own routing: after a
 * request is sent to a replica, its prompt blocks are recorded against it (the runtime will have cached them).
 * Bounded: at most `maxBlocks` block entries, least recently used evicted first (approximately: see below), and each entry remembers the
 * last few replicas only. It can be wrong (the runtime evicted, another node routed): it only biases routing.
 */
export interface PrefixIndex {
  /** For each replica, how many leading blocks of `blocks` it is believed to hold. */
  match(blocks: readonly number[], replicas: readonly string[]): Map<string, number>;
  /** The prompt of these blocks was sent to `replica`. */
  record(blocks: readonly number[], replica: string): void;
  readonly size: number;
}

/** Replicas remembered per block: a hot prefix may live on several. */
const REPLICAS_PER_BLOCK = 4;

interface Entry {
  /** The replicas believed to hold the block, most recent last. */
  readonly holders: string[];
  /** Its place in the eviction order: the insertion count when it was (re)inserted. */
  at: number;
}

export function createPrefixIndex(maxBlocks: number): PrefixIndex {
  // Map order is the eviction order (oldest first). A touched entry moves to the end (a delete and a set) only once
  // it is in the older half of that order: an entry touched at least once per maxBlocks / 2 insertions is never
  // evicted, and a hot prefix (every block of a long system prompt, on every request) costs one lookup per block.
  const entries = new Map<number, Entry>();
  let inserted = 0;
  const refreshAfter = Math.max(1, Math.floor(maxBlocks / 2));
  return {
    get size() {
      return entries.size;
    },
    match(blocks, replicas) {
      const matched = new Map<string, number>();
      let alive = replicas.filter((r) => r !== '');
      for (let i = 0; i < blocks.length && alive.length > 0; i++) {
        const holders = entries.get(blocks[i]!)?.holders;
        if (holders === undefined) break;
        const next: string[] = [];
        for (const r of alive) {
          if (holders.includes(r)) {
            next.push(r);
            matched.set(r, i + 1);
          }
        }
        alive = next;
      }
      return matched;
    },
    record(blocks, replica) {
      for (const h of blocks) {
        const e = entries.get(h);
        if (e === undefined) {
          entries.set(h, { holders: [replica], at: inserted++ });
          continue;
        }
        const holders = e.holders;
        if (holders[holders.length - 1] !== replica) {
          const at = holders.indexOf(replica);
          if (at >= 0) holders.splice(at, 1);
          holders.push(replica);
          if (holders.length > REPLICAS_PER_BLOCK) holders.shift();
        }
        if (inserted - e.at >= refreshAfter) {
          entries.delete(h);
          e.at = inserted++;
          entries.set(h, e);
        }
      }
      while (entries.size > maxBlocks) entries.delete(entries.keys().next().value as number);
    },
  };
}
