/** `closed`: commands go to Redis. `open`: Redis was too slow; every caller fails open at once while a probe waits. */
export type BreakerState = 'closed' | 'open';

/** Refusal of a command while the breaker is open (never sent, so it can have had no effect in Redis). */
export class BreakerOpenError extends Error {
  constructor() {
    super('redis circuit breaker open');
  }
}

export interface RedisBreaker {
  readonly state: BreakerState;
  /**
   * Runs one Redis command under the breaker: refused at once (BreakerOpenError) while open; a command
   * timeout (or a broken connection) opens it. Other errors (a script error) pass through and leave it closed.
   */
  run<T>(command: () => Promise<T>): Promise<T>;
  /** Called on every change of state (metrics, logs, flushing deferred releases). */
  onChange(listener: (state: BreakerState) => void): void;
  close(): void;
}

export interface RedisBreakerOptions {
  /** A cheap round trip (PING): it resolving closes the breaker. */
  readonly probe: () => Promise<unknown>;
  /** Pause between probes, ms (default 200). */
  readonly probeIntervalMs?: number;
}

/** ioredis's messages for a command that got no answer in time, or whose connection went away. */
const TRIPS = /timed out|Connection is closed|Stream isn't writeable|ECONNRESET|EPIPE/i;

/** True when the error says Redis is slow or gone (not that the command itself was bad). */
export const tripsBreaker = (err: unknown): boolean => err instanceof Error && TRIPS.test(err.message);

/**
 * A circuit breaker for the Redis shared by the rate limiter and the replica slots: one timeout is enough to
 * open it (a frozen Redis would otherwise cost every request a full command timeout, twice), and while it is
 * open a single probe at a time runs in the background; the first answer closes it.
 */
export function createRedisBreaker(opts: RedisBreakerOptions): RedisBreaker {
  const interval = opts.probeIntervalMs ?? 200;
  let state: BreakerState = 'closed';
  let timer: NodeJS.Timeout | null = null;
  let probing = false;
  let closed = false;
  const listeners: ((s: BreakerState) => void)[] = [];

  const set = (next: BreakerState): void => {
    if (state === next) return;
    state = next;
    for (const l of listeners) l(next);
  };

  const probe = (): void => {
    timer = null;
    if (closed || state === 'closed' || probing) return;
    probing = true;
    opts.probe().then(
      () => {
        probing = false;
        if (!closed) set('closed');
      },
      () => {
        probing = false;
        schedule();
      },
    );
  };
  const schedule = (): void => {
    if (closed || timer !== null || state === 'closed') return;
    timer = setTimeout(probe, interval);
    timer.unref();
  };

  const open = (): void => {
    if (closed) return;
    set('open');
    schedule();
  };

  return {
    get state() {
      return state;
    },
    run(command) {
      if (state === 'open') return Promise.reject(new BreakerOpenError());
      return command().catch((err: unknown) => {
        if (tripsBreaker(err)) open();
        throw err;
      });
    },
    onChange(listener) {
      listeners.push(listener);
    },
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
