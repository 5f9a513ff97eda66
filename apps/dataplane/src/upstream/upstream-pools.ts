import { Pool } from 'undici';
import type { ResolvedUpstream } from '../config/config-view.ts';

export interface UpstreamTimeouts {
  /** TCP/TLS connect, ms. */
  readonly connectMs: number;
  /** Until the response headers (the first byte), ms. */
  readonly firstByteMs: number;
  /** Longest silence between body chunks, ms. */
  readonly idleMs: number;
}

export const defaultTimeouts: UpstreamTimeouts = Object.freeze({ connectMs: 5000, firstByteMs: 120_000, idleMs: 60_000 });

/** One origin's pool and its in-flight count (the balancer's load signal). */
export interface OriginState {
  readonly pool: Pool;
  inFlight: number;
}

export interface UpstreamPools {
  /** The state of an origin, creating its pool on first use. */
  get(origin: string): OriginState;
  /** Picks the least-loaded upstream (round-robin on ties); `skip` holds origins already tried. */
  pick(upstreams: readonly ResolvedUpstream[], skip: ReadonlySet<string> | null): ResolvedUpstream | null;
  /** Closes pools of origins the snapshot no longer references (in-flight requests finish first). */
  retain(origins: ReadonlySet<string>): void;
  close(): Promise<void>;
}

/** Lazily created undici pools per upstream origin, reused across snapshot swaps. */
export function createUpstreamPools(timeouts: UpstreamTimeouts, connections = 256): UpstreamPools {
  const states = new Map<string, OriginState>();
  let rr = 0;

  const get = (origin: string): OriginState => {
    let s = states.get(origin);
    if (s === undefined) {
      const pool = new Pool(origin, {
        connections,
        pipelining: 1,
        connectTimeout: timeouts.connectMs,
        headersTimeout: timeouts.firstByteMs,
        bodyTimeout: timeouts.idleMs,
        keepAliveTimeout: 30_000,
      });
      s = { pool, inFlight: 0 };
      states.set(origin, s);
    }
    return s;
  };

  return {
    get,
    pick(upstreams, skip) {
      const n = upstreams.length;
      if (n === 1) {
        const only = upstreams[0]!;
        return skip !== null && skip.has(only.origin) ? null : only;
      }
      let best: ResolvedUpstream | null = null;
      let bestLoad = Number.POSITIVE_INFINITY;
      const start = rr++ % n;
      for (let i = 0; i < n; i++) {
        const u = upstreams[(start + i) % n]!;
        if (skip !== null && skip.has(u.origin)) continue;
        const load = states.get(u.origin)?.inFlight ?? 0;
        if (load < bestLoad) {
          best = u;
          bestLoad = load;
        }
      }
      return best;
    },
    retain(origins) {
      for (const [origin, s] of states) {
        if (origins.has(origin)) continue;
        states.delete(origin);
        s.pool.close().catch(() => {});
      }
    },
    async close() {
      const all = [...states.values()];
      states.clear();
      await Promise.all(all.map((s) => s.pool.destroy().catch(() => {})));
    },
  };
}
