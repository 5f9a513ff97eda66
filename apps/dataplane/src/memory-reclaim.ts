/**
 * Gives memory back after a burst (issue 12, "A lighter node"). After 1,000 slow streams end, V8's heap in use
 * falls back to idle but V8 keeps the pages it grew to (measured: 62 MiB of heap pages for 31 MiB in use, 20 s
 * after) and RSS stays at the peak. When the node's load has fallen from a high level to a quarter of it or
 * less and stayed there for a few seconds, one memory-reducing full GC (V8's "last resort" collection: several
 * rounds, compaction, pooled pages released) returns most of it.
 *
 * Off the request path: a sampling timer (unref'd) reads a load figure and heap statistics. It never runs twice
 * without a new rise of the load in between (steady load, high or low, never triggers it) and at most once per
 * `minIntervalMs`. The collection is a pause of the main thread (tens of ms for a 60 MiB heap), taken only when
 * the load is low.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface ReclaimOptions {
  /** The node's load now (open client connections, or requests in flight). */
  readonly load: () => number | Promise<number>;
  /** Runs the collection; default: V8's memory-reducing full GC (see `memoryReducingGc`). */
  readonly collect?: () => void;
  /** V8 heap pages held and in use (bytes); default `v8.getHeapStatistics()`. */
  readonly heap?: () => { readonly physical: number; readonly used: number };
  readonly now?: () => number;
  /** Sampling period (default 2,500 ms). */
  readonly sampleMs?: number;
  /** The load must have reached this since the last collection (default 64) ... */
  readonly minPeakLoad?: number;
  /** ... and stayed at a quarter of that peak or less for this long (default 5,000 ms) ... */
  readonly quietMs?: number;
  /** ... with at least this much of V8's heap pages not in use (default 8 MiB) ... */
  readonly minSlackBytes?: number;
  /** ... and at least this long since the last collection (default 30,000 ms). */
  readonly minIntervalMs?: number;
  /** Told after each collection (for a log line). */
  readonly onReclaim?: (r: ReclaimResult) => void;
}

export interface ReclaimResult {
  readonly peakLoad: number;
  readonly load: number;
  readonly heapPhysicalBefore: number;
  readonly heapPhysicalAfter: number;
  readonly rssBefore: number;
  readonly rssAfter: number;
  readonly ms: number;
}

export interface MemoryReclaimer {
  /** One sample (the timer calls it; tests call it directly). True when it collected. */
  sample(): Promise<boolean>;
  stop(): void;
}

type GcFunction = (options?: { type?: 'major' | 'minor'; execution?: 'sync' | 'async'; flavor?: 'regular' | 'last-resort' }) => void;

let gcFn: GcFunction | null = null;

/**
 * V8's memory-reducing full GC without starting the process with `--expose-gc`: the flag is set for a moment,
 * a new context is made (its global has `gc`), and the flag is cleared again, so the node's own global never
 * gets a `gc`. `flavor: 'last-resort'` is V8's CollectAllAvailableGarbage (what it runs before giving up on an
 * allocation): it compacts and releases pooled pages, where a plain `gc()` kept 155 of 166 MiB of pages in a
 * test that freed 86% of its heap (the last-resort flavor: 59 MiB).
 */
export function memoryReducingGc(): void {
  if (gcFn === null) {
    const existing = (globalThis as { gc?: GcFunction }).gc;
    if (typeof existing === 'function') {
      gcFn = existing;
    } else {
      setFlagsFromString('--expose-gc');
      try {
        gcFn = runInNewContext('gc') as GcFunction;
      } finally {
        setFlagsFromString('--no-expose-gc');
      }
    }
  }
  gcFn({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

const defaultHeap = (): { physical: number; used: number } => {
  const h = getHeapStatistics();
  return { physical: h.total_physical_size, used: h.used_heap_size };
};

export function startMemoryReclaim(opts: ReclaimOptions): MemoryReclaimer {
  const now = opts.now ?? (() => performance.now());
  const heap = opts.heap ?? defaultHeap;
  const collect = opts.collect ?? memoryReducingGc;
  const minPeakLoad = opts.minPeakLoad ?? 64;
  const quietMs = opts.quietMs ?? 5000;
  const minSlack = opts.minSlackBytes ?? 8 * 1024 * 1024;
  const minInterval = opts.minIntervalMs ?? 30_000;
  let peakLoad = 0;
  let quietSince: number | null = null;
  let lastCollect = -Infinity;
  let busy = false;

  async function sample(): Promise<boolean> {
    if (busy) return false;
    busy = true;
    try {
      const load = await opts.load();
      const t = now();
      if (load > peakLoad) peakLoad = load;
      if (peakLoad < minPeakLoad || load * 4 > peakLoad) {
        quietSince = null;
        return false;
      }
      quietSince ??= t;
      if (t - quietSince < quietMs || t - lastCollect < minInterval) return false;
      const before = heap();
      if (before.physical - before.used < minSlack) return false;
      const rssBefore = process.memoryUsage.rss();
      const t0 = performance.now();
      collect();
      const ms = performance.now() - t0;
      lastCollect = now();
      const peak = peakLoad;
      // A new collection needs a new rise of the load from here.
      peakLoad = load;
      quietSince = null;
      opts.onReclaim?.({
        peakLoad: peak,
        load,
        heapPhysicalBefore: before.physical,
        heapPhysicalAfter: heap().physical,
        rssBefore,
        rssAfter: process.memoryUsage.rss(),
        ms,
      });
      return true;
    } finally {
      busy = false;
    }
  }

  const timer = setInterval(() => void sample().catch(() => {}), opts.sampleMs ?? 2500);
  timer.unref();
  return { sample, stop: () => clearInterval(timer) };
}
