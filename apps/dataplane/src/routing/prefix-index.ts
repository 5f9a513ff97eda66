/**
 * An approximate map of which replica holds which prompt prefix, learned from this node's own routing: after a
 * request is sent to a replica, its prompt blocks are recorded against it (the runtime will have cached them).
 * Bounded: at most `maxBlocks` block entries, least recently used evicted first, and each entry remembers the
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

export function createPrefixIndex(maxBlocks: number): PrefixIndex {
  // Map order is the LRU order: a touched entry is deleted and set again, so it moves to the end.
  const entries = new Map<number, string[]>();
  return {
    get size() {
      return entries.size;
    },
    match(blocks, replicas) {
      const matched = new Map<string, number>();
      let alive = replicas.filter((r) => r !== '');
      for (let i = 0; i < blocks.length && alive.length > 0; i++) {
        const holders = entries.get(blocks[i]!);
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
        const holders = entries.get(h);
        if (holders === undefined) {
          entries.set(h, [replica]);
        } else {
          entries.delete(h);
          const at = holders.indexOf(replica);
          if (at >= 0) holders.splice(at, 1);
          holders.push(replica);
          if (holders.length > REPLICAS_PER_BLOCK) holders.shift();
          entries.set(h, holders);
        }
      }
      while (entries.size > maxBlocks) entries.delete(entries.keys().next().value as number);
    },
  };
}
