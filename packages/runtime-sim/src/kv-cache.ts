/**
 * A paged KV cache with automatic prefix caching, after vLLM v1's block manager: memory is `capacityBlocks`
 * blocks of `blockSize` tokens; a prompt's full blocks are named by chained hashes (block i's hash covers
 * every token up to the end of block i), so a block matches only when the whole prefix before it matches
 * too. Blocks a finished request leaves keep their hash and stay reusable until memory is needed, then the
 * least recently released go first (LRU). Free-but-cached blocks count as free, as in vLLM's usage gauge.
 */
export interface KvCacheOptions {
  readonly capacityTokens: number;
  readonly blockSize: number;
  /** Off: nothing is ever matched (every prompt is prefilled whole). */
  readonly prefixCaching: boolean;
}

/** What one admitted request holds. */
export interface KvLease {
  /** Prompt tokens found in the cache (not prefilled again). */
  readonly cachedTokens: number;
  /** The prompt was computed: its full blocks become matchable by later requests. */
  prefilled(): void;
  /** The request ended: its blocks are released (cached ones stay matchable until evicted). */
  release(): void;
}

export interface KvCache {
  readonly blockSize: number;
  readonly totalBlocks: number;
  /** Blocks held by running requests. */
  readonly usedBlocks: number;
  /** Blocks no request holds that still carry a prefix (evictable). */
  readonly cachedFreeBlocks: number;
  /** Used share, 0..1 (`vllm:kv_cache_usage_perc`). */
  usage(): number;
  /** Blocks a request of this many tokens needs in all. */
  blocksFor(tokens: number): number;
  /**
   * Takes the blocks for a request (prompt plus `completionTokens`, reserved up front so that it never has to be
   * preempted), reusing cached prompt blocks; null when memory is short (the request waits).
   */
  tryAdmit(blockHashes: readonly number[], promptTokens: number, completionTokens: number): KvLease | null;
  /** Cached prompt tokens a request would find now, without taking anything (queries/hits are not counted). */
  peekCachedTokens(blockHashes: readonly number[], promptTokens: number): number;
  /** Prefix-cache queries and hits so far, in tokens (`vllm:prefix_cache_queries` / `_hits`). */
  readonly queriedTokens: number;
  readonly hitTokens: number;
}

interface CachedBlock {
  refs: number;
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/**
 * Chained hashes of the full `blockSize`-token blocks of `tokens` (a trailing partial block has none). Two 32-bit
 * FNV-1a lanes with different seeds make a 52-bit number: collisions are negligible at simulator scale.
 */
export function blockHashes(tokens: Uint32Array | readonly number[], blockSize: number): number[] {
  const out: number[] = [];
  let a = FNV_OFFSET;
  let b = 0x9747b28c;
  const full = Math.floor(tokens.length / blockSize) * blockSize;
  for (let i = 0; i < full; i++) {
    const t = tokens[i]!;
    a = Math.imul(a ^ t, FNV_PRIME);
    b = Math.imul(b ^ t ^ (t >>> 16), 0x5bd1e995);
    b ^= b >>> 13;
    if ((i + 1) % blockSize === 0) out.push((a >>> 0) * 0x100000 + ((b >>> 0) & 0xfffff));
  }
  return out;
}

export function createKvCache(o: KvCacheOptions): KvCache {
  const { blockSize } = o;
  const totalBlocks = Math.max(1, Math.floor(o.capacityTokens / blockSize));
  /** Every block that carries a hash, held or not. */
  const cached = new Map<number, CachedBlock>();
  /** Hashes of cached blocks nobody holds, least recently released first (Map order). */
  const evictable = new Map<number, true>();
  /** Held blocks that carry no hash (partial blocks, decode space, duplicates). */
  let anonymousUsed = 0;
  let hashedUsed = 0;
  let queriedTokens = 0;
  let hitTokens = 0;

  const matchedBlocks = (hashes: readonly number[], promptTokens: number): number => {
    if (!o.prefixCaching) return 0;
    // As in vLLM, the last prompt token is always computed (its logits give the first output token).
    const limit = Math.min(hashes.length, Math.floor((promptTokens - 1) / blockSize));
    let n = 0;
    while (n < limit && cached.has(hashes[n]!)) n++;
    return n;
  };
  const free = (): number => totalBlocks - anonymousUsed - hashedUsed;

  return {
    blockSize,
    totalBlocks,
    get usedBlocks() {
      return anonymousUsed + hashedUsed;
    },
    get cachedFreeBlocks() {
      return evictable.size;
    },
    get queriedTokens() {
      return queriedTokens;
    },
    get hitTokens() {
      return hitTokens;
    },
    usage: () => (anonymousUsed + hashedUsed) / totalBlocks,
    blocksFor: (tokens) => Math.ceil(Math.max(1, tokens) / blockSize),
    peekCachedTokens: (hashes, promptTokens) => matchedBlocks(hashes, promptTokens) * blockSize,
    tryAdmit(hashes, promptTokens, completionTokens) {
      const hit = matchedBlocks(hashes, promptTokens);
      const needed = Math.ceil(Math.max(1, promptTokens + completionTokens) / blockSize);
      const fresh = needed - hit;
      // Matched blocks nobody holds come out of the free pool without an allocation.
      let revived = 0;
      for (let i = 0; i < hit; i++) if (cached.get(hashes[i]!)!.refs === 0) revived++;
      if (free() - revived < fresh) return null;

      queriedTokens += promptTokens;
      hitTokens += hit * blockSize;
      const held: number[] = [];
      for (let i = 0; i < hit; i++) {
        const h = hashes[i]!;
        const b = cached.get(h)!;
        if (b.refs++ === 0) {
          evictable.delete(h);
          hashedUsed++;
        }
        held.push(h);
      }
      // New blocks come from never-used memory first, then from the least recently released cached blocks.
      let untouched = totalBlocks - anonymousUsed - hashedUsed - evictable.size;
      for (let k = 0; k < fresh; k++) {
        if (untouched > 0) untouched--;
        else {
          const oldest = evictable.keys().next().value as number;
          evictable.delete(oldest);
          cached.delete(oldest);
        }
      }
      anonymousUsed += fresh;
      let state: 'prefilling' | 'running' | 'done' = 'prefilling';
      return {
        cachedTokens: hit * blockSize,
        prefilled() {
          if (state !== 'prefilling') return;
          state = 'running';
          if (!o.prefixCaching) return;
          // The prompt's computed full blocks get their hashes (a block another request cached meanwhile stays anonymous).
          const full = Math.min(hashes.length, Math.floor(promptTokens / blockSize));
          for (let i = hit; i < full; i++) {
            const h = hashes[i]!;
            if (cached.has(h)) continue;
            cached.set(h, { refs: 1 });
            anonymousUsed--;
            hashedUsed++;
            held.push(h);
          }
        },
        release() {
          if (state === 'done') return;
          state = 'done';
          anonymousUsed -= needed - held.length;
          for (const h of held) {
            const b = cached.get(h)!;
            if (--b.refs === 0) {
              hashedUsed--;
              evictable.set(h, true);
            }
          }
        },
      };
    },
  };
}
