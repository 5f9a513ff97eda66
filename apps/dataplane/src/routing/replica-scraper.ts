import type { ResolvedUpstream } from '../config/config-view.ts';
import type { UpstreamPools } from '../upstream/upstream-pools.ts';
import { parseReplicaMetrics } from './parse-replica-metrics.ts';

/** One replica's load as its runtime last reported it. */
export interface ReplicaLoad {
  readonly waiting: number;
  readonly running: number;
  /** 0..1, or null when the runtime does not export it. */
  readonly kvUsage: number | null;
  /** performance.now() when the scrape answered. */
  readonly at: number;
  /** This node's requests in flight on the replica at that moment (to add what it sent since). */
  readonly inFlightAtScrape: number;
}

export interface ReplicaScraperOptions {
  readonly pools: UpstreamPools;
  /** Between scrapes of one replica, ms. */
  readonly intervalMs: number;
  /** A scrape slower than this fails, ms. */
  readonly timeoutMs: number;
  /** Scrapes at once, across every replica. */
  readonly concurrency: number;
  readonly onScrape?: (origin: string, ok: boolean) => void;
}

export interface ReplicaScraper {
  /** The replicas to scrape: every upstream whose runtime exports vLLM metrics (others are never asked). */
  setReplicas(upstreams: Iterable<ResolvedUpstream>): void;
  /** The last successful scrape of an origin, or null (never scraped, or no vLLM metrics there). */
  load(origin: string): ReplicaLoad | null;
  /** Replica id and last load of each scraped origin (metrics). */
  entries(): IterableIterator<[string, { readonly replicaId: string; readonly load: ReplicaLoad | null; readonly failures: number }]>;
  close(): void;
}

/** Runtimes whose `/metrics` speak vLLM's names. */
const SCRAPED_KINDS = new Set(['vllm', 'sim']);
/** A runtime that answers without vLLM metrics is asked again only this rarely, ms. */
const NO_METRICS_BACKOFF_MS = 60_000;
const MAX_BODY = 1024 * 1024;

interface Entry {
  replicaId: string;
  path: string;
  load: ReplicaLoad | null;
  busy: boolean;
  next: number;
  failures: number;
}

const metricsPathOf = (u: ResolvedUpstream): string => {
  const i = u.chatPath.lastIndexOf('/v1/');
  return `${i > 0 ? u.chatPath.slice(0, i) : ''}/metrics`;
};

/**
 * Scrapes each replica's `/metrics` on a timer, off the request path: a slow or failing scrape only leaves that
 * replica's numbers ageing (the router then treats them as stale). Scrapes go through the replica's own pool,
 * so a tenant-given origin is dialled through the address guard like its chat requests.
 */
export function createReplicaScraper(o: ReplicaScraperOptions): ReplicaScraper {
  const entries = new Map<string, Entry>();
  let active = 0;
  let closed = false;

  const scrape = async (origin: string, e: Entry): Promise<void> => {
    const state = o.pools.get(origin);
    const signal = AbortSignal.timeout(o.timeoutMs);
    const res = await state.pool.request({ method: 'GET', path: e.path, headersTimeout: o.timeoutMs, bodyTimeout: o.timeoutMs, signal });
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new Error(`status ${res.statusCode}`);
    }
    let size = 0;
    const chunks: Buffer[] = [];
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY) throw new Error('metrics body too large');
      chunks.push(chunk);
    }
    const parsed = parseReplicaMetrics(Buffer.concat(chunks).toString('utf8'));
    if (parsed === null) {
      e.load = null;
      e.next = performance.now() + NO_METRICS_BACKOFF_MS;
      return;
    }
    e.load = { ...parsed, at: performance.now(), inFlightAtScrape: state.inFlight };
  };

  const tick = (): void => {
    if (closed) return;
    const now = performance.now();
    for (const [origin, e] of entries) {
      if (active >= o.concurrency) return;
      if (e.busy || e.next > now) continue;
      e.busy = true;
      e.next = now + o.intervalMs;
      active++;
      scrape(origin, e)
        .then(
          () => {
            e.failures = 0;
            o.onScrape?.(origin, true);
          },
          () => {
            e.failures++;
            o.onScrape?.(origin, false);
          },
        )
        .finally(() => {
          e.busy = false;
          active--;
        });
    }
  };
  // Ticks more often than the interval so that a replica whose scrape ended late is not held a whole period.
  const timer = setInterval(tick, Math.max(10, Math.floor(o.intervalMs / 4)));
  timer.unref();

  return {
    setReplicas(upstreams) {
      const seen = new Set<string>();
      for (const u of upstreams) {
        if (!SCRAPED_KINDS.has(u.kind) || seen.has(u.origin)) continue;
        seen.add(u.origin);
        const e = entries.get(u.origin);
        if (e === undefined) entries.set(u.origin, { replicaId: u.id, path: metricsPathOf(u), load: null, busy: false, next: 0, failures: 0 });
        else {
          e.replicaId = u.id;
          e.path = metricsPathOf(u);
        }
      }
      for (const origin of entries.keys()) if (!seen.has(origin)) entries.delete(origin);
      queueMicrotask(tick);
    },
    load: (origin) => entries.get(origin)?.load ?? null,
    entries: () => entries.entries(),
    close() {
      closed = true;
      clearInterval(timer);
    },
  };
}
