import { buildConnector, Pool } from 'undici';
import { CHAT_ONREAD, H1Pool, type H1Connector } from './h1-pool.ts';
import { guardConnector, type AddressGuard } from '@infer/shared/address-guard';
import type { ResolvedUpstream } from '../config/config-view.ts';
import { adapterFor } from '../runtimes/runtime-registry.ts';
import { defaultOutlierPolicy, eject, mayEject, newOutlierState, recordFailure, recordSuccess } from './outlier-detector.ts';
import type { OutlierPolicy, OutlierState } from './outlier-detector.ts';

export interface UpstreamTimeouts {
  /** TCP/TLS connect, ms. */
  readonly connectMs: number;
  /** Until the first byte of a streamed response, ms. */
  readonly firstByteMs: number;
  /**
   * Until the first byte of a non-streamed response, ms: a runtime sends nothing of it (not even the head) before
   * it has generated the whole answer, so this bounds the whole generation and is far longer (the OpenAI SDKs wait
   * 10 minutes).
   */
  readonly responseMs: number;
  /** Longest silence between body chunks, ms. */
  readonly idleMs: number;
}

/** How long a runtime may take to the first byte of its answer: a stream's first token, or a JSON answer whole. */
export const firstByteLimitMs = (timeouts: UpstreamTimeouts, stream: boolean): number => (stream ? timeouts.firstByteMs : timeouts.responseMs);

export const defaultTimeouts: UpstreamTimeouts = Object.freeze({ connectMs: 5000, firstByteMs: 120_000, responseMs: 600_000, idleMs: 60_000 });

/** When a replica is taken out of rotation, and for how long (outlier-detector.ts). */
export type EjectionPolicy = OutlierPolicy;

export const defaultEjection: EjectionPolicy = defaultOutlierPolicy;

/** One origin's pool, its in-flight count (the balancer's load signal) and its health. */
export interface OriginState {
  readonly origin: string;
  /**
   * The chat requests' connections (h1-pool.ts): replaced by a larger pool when the admitted concurrency grows (the
   * old one finishes its requests).
   */
  chat: H1Pool;
  /** Health probes and metrics scrapes: undici, a few connections of their own. */
  pool: Pool;
  /** The chat pool's connection cap. */
  connections: number;
  /** Whether the pool dials through the address guard (the origin is tenant-given). */
  readonly guarded: boolean;
  /**
   * This node's requests on the replica whose runtime request has not ended (a timed-out or abandoned one counts
   * until undici saw its end): the per-replica slot count, and the balancer's load signal.
   */
  inFlight: number;
  /** The origin left the snapshot while requests still ran there: its pool is closed, its counts kept. */
  retired: boolean;
  /** Uncached prompt blocks (src/routing) of this node's requests there that have no first byte yet: prefill work queued. */
  pendingPrefillBlocks: number;
  /** Recent outcomes of real traffic and past ejections. */
  readonly outlier: OutlierState;
  ejected: boolean;
  probeTimer: NodeJS.Timeout | null;
  /** The health URL path of the upstream that was last seen on this origin. */
  healthPath: string;
}

export interface UpstreamPoolsOptions {
  readonly timeouts: UpstreamTimeouts;
  /**
   * Connections per origin. With `connectionsFor` it is a floor under the derived size; without it, the size
   * (default 256).
   */
  readonly connections?: number;
  /**
   * The connections an origin needs: what the node may admit to it at once (limits' target capacity, summed over
   * the targets it serves), so that no admitted request waits for a socket. A pool grows when this does.
   */
  readonly connectionsFor?: (origin: string) => number;
  readonly ejection?: Partial<EjectionPolicy>;
  /** Called when a replica is ejected (metrics, logs), with how long the ejection lasts. */
  readonly onEject?: (origin: string, upstreamId: string, ejectionMs: number) => void;
  readonly onRestore?: (origin: string) => void;
  /**
   * Origins a tenant gave (external deployments) connect only through this guard, which resolves the name,
   * refuses loopback/private/link-local/metadata addresses and pins the socket to the checked address;
   * an origin any tenant-given upstream names is dialled that way for every route (fail closed), and a pool
   * whose provenance changed is replaced, so no socket opened unguarded serves a tenant-given origin.
   */
  readonly addressGuard?: { readonly guard: AddressGuard; readonly isTenantOrigin: (origin: string) => boolean };
}

export interface UpstreamPools {
  /** The state of an origin, creating its pool on first use. */
  get(origin: string): OriginState;
  /**
   * Picks the least-loaded healthy upstream (round-robin on ties), skipping origins in `skip` and replicas with
   * `cap` requests in flight (full). When every remaining one with room is ejected it still returns the least
   * loaded of them (try anyway); null when all were tried or every one left is full.
   */
  pick(upstreams: readonly ResolvedUpstream[], skip: ReadonlySet<string> | null, cap?: number): ResolvedUpstream | null;
  /** True when `u` has `cap` requests in flight (its runtime requests have not all ended). */
  full(u: ResolvedUpstream, cap: number): boolean;
  /** A runtime request ended on `state`: its replica slot frees, and requests waiting for one look again. */
  ended(state: OriginState): void;
  /**
   * Waits until some runtime request of this node ends (a replica slot may have freed), the client leaves, or
   * `ms` pass; resolves true unless the client left. Waiters wake in arrival order.
   */
  waitForSlot(res: { once(ev: 'close', fn: () => void): unknown; off(ev: 'close', fn: () => void): unknown }, ms: number): Promise<boolean>;
  /** A request to this upstream got an answer the runtime is not at fault for. */
  succeeded(state: OriginState): void;
  /**
   * A request to this upstream failed (connect error, 5xx, timeout, cut stream); `siblings` are the target's
   * replicas (an ejection never leaves the target without one in rotation).
   */
  failed(state: OriginState, upstream: ResolvedUpstream, siblings: readonly ResolvedUpstream[]): void;
  /** Closes pools of origins the snapshot no longer references (in-flight requests finish first). */
  retain(origins: ReadonlySet<string>): void;
  /** Every origin's state (metrics). */
  states(): IterableIterator<OriginState>;
  close(): Promise<void>;
}

const healthPathOf = (u: ResolvedUpstream): string => {
  const adapter = adapterFor(u.kind);
  const base = u.chatPath.endsWith(adapter.chatPath) ? u.chatPath.slice(0, u.chatPath.length - adapter.chatPath.length) : '';
  return base + adapter.healthPath;
};

/** How long an idle chat connection is kept (below uvicorn's 5 s). */
export const CHAT_KEEP_ALIVE_MS = 4000;

/**
 * undici's connector for the chat pool (h1-pool.ts): plain-HTTP sockets read into the pool's shared buffer
 * (`onread`: no buffer allocated and no stream machinery per read); TLS sockets read through their own stream.
 */
export function chatConnector(options: buildConnector.BuildOptions): H1Connector {
  const plain = buildConnector({ ...options, onread: CHAT_ONREAD }) as unknown as H1Connector;
  const tls = buildConnector(options) as unknown as H1Connector;
  return (o, callback) => (o.protocol === 'https:' ? tls : plain)(o, callback);
}

/** Lazily created undici pools per upstream origin, reused across snapshot swaps, with outlier ejection. */
export function createUpstreamPools(opts: UpstreamPoolsOptions): UpstreamPools {
  const { timeouts } = opts;
  const floor = opts.connections ?? (opts.connectionsFor ? 1 : 256);
  const sizeFor = (origin: string): number => Math.max(floor, opts.connectionsFor?.(origin) ?? 0);
  const policy: EjectionPolicy = Object.freeze({ ...defaultEjection, ...opts.ejection });
  const states = new Map<string, OriginState>();
  /** Requests waiting for a replica slot (every replica of their target full). */
  let slotWaiters: (() => void)[] = [];
  let rr = 0;
  let closed = false;

  // undici never follows redirects unless asked (no maxRedirections, no redirect interceptor): an upstream's
  // 3xx is relayed as an answer, never dialled.
  // HTTP/1.1 only (no h2 in TLS's ALPN): both clients speak 1.1.
  const plainConnect = buildConnector({ timeout: timeouts.connectMs, allowH2: false });
  const addressGuard = opts.addressGuard;
  const guardedConnect = addressGuard
    ? guardConnector(addressGuard.guard, buildConnector({ timeout: timeouts.connectMs, allowH2: false, lookup: addressGuard.guard.lookup }))
    : null;
  const guardedOrigin = (origin: string): boolean => guardedConnect !== null && addressGuard?.isTenantOrigin(origin) === true;

  const connectorFor = (guarded: boolean): typeof plainConnect => (guarded && guardedConnect !== null ? guardedConnect : plainConnect);
  const plainChatConnect = chatConnector({ timeout: timeouts.connectMs, allowH2: false });
  const guardedChatConnect = addressGuard
    ? guardConnector(addressGuard.guard, chatConnector({ timeout: timeouts.connectMs, allowH2: false, lookup: addressGuard.guard.lookup }))
    : null;
  // The forwarder runs its own first-byte and idle timers on chat requests; probes and scrapes pass their own.
  const newPool = (origin: string, guarded: boolean): Pool =>
    new Pool(origin, { connections: 4, pipelining: 1, connect: connectorFor(guarded), headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 30_000 });
  // Idle chat connections close after 4 s, before the runtime's own keep-alive timeout (uvicorn's default, vLLM's and
  // SGLang's server, is 5 s and it sends no Keep-Alive hint): a request written just as the runtime closed an idle
  // socket would fail with a reset, and be retried elsewhere or answered 502.
  const newChatPool = (origin: string, connections: number, guarded: boolean): H1Pool =>
    new H1Pool(origin, {
      connections,
      connect: guarded && guardedChatConnect !== null ? guardedChatConnect : plainChatConnect,
      keepAliveTimeout: CHAT_KEEP_ALIVE_MS,
    });

  const get = (origin: string): OriginState => {
    let s = states.get(origin);
    const guarded = guardedOrigin(origin);
    const connections = sizeFor(origin);
    if (s !== undefined && !s.retired && s.guarded === guarded && s.connections < connections) {
      // More may be admitted now (a snapshot raised Concurrency or added replicas): a larger pool takes new
      // requests, the old one finishes those it carries. Health and in-flight counts stay with the origin.
      const old = s.chat;
      s.chat = newChatPool(origin, connections, guarded);
      s.connections = connections;
      old.close().catch(() => {});
    }
    if (s !== undefined && s.retired && s.guarded === guarded) {
      // Back in the snapshot while its old requests still run: new pools, the same counts.
      s.pool = newPool(origin, guarded);
      s.chat = newChatPool(origin, connections, guarded);
      s.connections = connections;
      s.retired = false;
    }
    if (s !== undefined && s.guarded !== guarded) {
      // Provenance changed with a snapshot: requests in flight finish on the old pool, new ones get new sockets.
      if (s.probeTimer !== null) clearTimeout(s.probeTimer);
      s.pool.close().catch(() => {});
      s.chat.close().catch(() => {});
      s = undefined;
    }
    if (s === undefined) {
      s = {
        origin,
        chat: newChatPool(origin, connections, guarded),
        pool: newPool(origin, guarded),
        connections,
        guarded,
        inFlight: 0,
        retired: false,
        pendingPrefillBlocks: 0,
        outlier: newOutlierState(policy),
        ejected: false,
        probeTimer: null,
        healthPath: '/health',
      };
      states.set(origin, s);
    }
    return s;
  };

  /** Back in rotation; `probation`: its next real request decides (a failure ejects it again, for longer). */
  const restore = (s: OriginState, probation: boolean): void => {
    if (s.probeTimer !== null) clearTimeout(s.probeTimer);
    s.probeTimer = null;
    if (s.ejected) {
      s.ejected = false;
      s.outlier.probation = probation;
      opts.onRestore?.(s.origin);
    }
  };

  // After the ejection time, one GET on the health path must pass before real traffic tries it again
  // (on probation); a failed probe waits one base cool-down more.
  const scheduleProbe = (s: OriginState, delayMs: number): void => {
    if (closed) return;
    s.probeTimer = setTimeout(() => {
      s.probeTimer = null;
      if (closed || states.get(s.origin) !== s) return;
      s.pool
        .request({ method: 'GET', path: s.healthPath, headersTimeout: timeouts.connectMs, bodyTimeout: timeouts.connectMs })
        .then(async (res) => {
          await res.body.dump();
          if (res.statusCode >= 200 && res.statusCode < 300) restore(s, true);
          else if (s.ejected) scheduleProbe(s, policy.cooldownMs);
        })
        .catch(() => {
          if (s.ejected) scheduleProbe(s, policy.cooldownMs);
        });
    }, delayMs);
    s.probeTimer.unref();
  };

  return {
    get,
    pick(upstreams, skip, cap = Number.POSITIVE_INFINITY) {
      const n = upstreams.length;
      if (n === 1) {
        const only = upstreams[0]!;
        return (skip !== null && skip.has(only.origin)) || (states.get(only.origin)?.inFlight ?? 0) >= cap ? null : only;
      }
      let best: ResolvedUpstream | null = null;
      let bestLoad = Number.POSITIVE_INFINITY;
      let fallback: ResolvedUpstream | null = null;
      let fallbackLoad = Number.POSITIVE_INFINITY;
      const start = rr++ % n;
      for (let i = 0; i < n; i++) {
        const u = upstreams[(start + i) % n]!;
        if (skip !== null && skip.has(u.origin)) continue;
        const s = states.get(u.origin);
        const load = s?.inFlight ?? 0;
        if (load >= cap) continue;
        if (s?.ejected === true) {
          if (load < fallbackLoad) {
            fallback = u;
            fallbackLoad = load;
          }
        } else if (load < bestLoad) {
          best = u;
          bestLoad = load;
        }
      }
      return best ?? fallback;
    },
    full: (u, cap) => (states.get(u.origin)?.inFlight ?? 0) >= cap,
    ended(s) {
      s.inFlight--;
      if (slotWaiters.length === 0) return;
      const woken = slotWaiters;
      slotWaiters = [];
      for (const w of woken) w();
    },
    waitForSlot(res, ms) {
      return new Promise<boolean>((resolve) => {
        const onClose = (): void => finish(false);
        const finish = (ok: boolean): void => {
          clearTimeout(timer);
          res.off('close', onClose);
          const i = slotWaiters.indexOf(wake);
          if (i >= 0) slotWaiters.splice(i, 1);
          resolve(ok);
        };
        const wake = (): void => finish(true);
        const timer = setTimeout(wake, ms);
        res.once('close', onClose);
        slotWaiters.push(wake);
      });
    },
    succeeded(s) {
      recordSuccess(s.outlier, policy);
      if (s.ejected) restore(s, false); // tried as the last resort, and it worked
    },
    failed(s, upstream, siblings) {
      if (!recordFailure(s.outlier, policy) || s.ejected) return;
      let ejected = 0;
      for (const u of siblings) if (u.origin !== s.origin && states.get(u.origin)?.ejected === true) ejected++;
      if (!mayEject(ejected, siblings.length, policy)) return;
      const ms = eject(s.outlier, policy);
      s.ejected = true;
      s.healthPath = healthPathOf(upstream);
      opts.onEject?.(s.origin, upstream.id, ms);
      scheduleProbe(s, ms);
    },
    retain(origins) {
      for (const [origin, s] of states) {
        if (origins.has(origin)) continue;
        if (s.probeTimer !== null) clearTimeout(s.probeTimer);
        s.probeTimer = null;
        if (!s.retired) {
          s.pool.close().catch(() => {});
          s.chat.close().catch(() => {});
        }
        // Requests still run there: its count stays, so a replica that comes back is not sent more than its slots.
        if (s.inFlight > 0) s.retired = true;
        else states.delete(origin);
      }
    },
    states: () => states.values(),
    async close() {
      closed = true;
      const all = [...states.values()];
      states.clear();
      for (const s of all) if (s.probeTimer !== null) clearTimeout(s.probeTimer);
      await Promise.all(all.flatMap((s) => [s.pool.destroy().catch(() => {}), s.chat.destroy()]));
    },
  };
}
