import type pg from 'pg';
import type { ExternalWakeSource, ExternalWakeState } from './change-hub.ts';
import { OUTBOX_CHANNEL } from './snapshots.service.ts';

export interface PostgresWakeSourceOptions {
  /** First retry delay after a lost or refused connection (default 250 ms); doubles per failure up to `maxBackoffMs`. */
  readonly minBackoffMs?: number;
  /** Longest delay between retries (default 10 s). Retries never stop: an outage of any length ends in a LISTEN again. */
  readonly maxBackoffMs?: number;
  /**
   * How often the held connection runs a query (default 5 s). A frozen server or a cut network sends no
   * error, so without it the LISTEN would look healthy while nothing arrives.
   */
  readonly heartbeatMs?: number;
  /** How long a connect, the LISTEN or a heartbeat may take before the connection counts as lost (default 5 s). */
  readonly timeoutMs?: number;
  readonly onError?: (err: unknown) => void;
  /** Called whenever `connected` changes. */
  readonly onStateChange?: (state: ExternalWakeState) => void;
}

class TimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`${what} took longer than ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

/** Races `promise` with a timer; a value that arrives too late goes to `late` (to give a connection back). */
function withTimeout<T>(promise: Promise<T>, ms: number, what: string, late?: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(new TimeoutError(what, ms));
    }, ms);
    promise.then(
      (value) => {
        if (settled) late?.(value);
        else {
          settled = true;
          clearTimeout(timer);
          resolve(value);
        }
      },
      (err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/**
 * LISTENs on the outbox channel over a client held out of the pool, so this replica learns of rows
 * another replica committed. A lost connection is retried forever with capped exponential backoff and
 * jitter (replicas that lost the same server do not reconnect in lockstep); the poll covers the gap.
 */
export function postgresWakeSource(pool: pg.Pool, opts: PostgresWakeSourceOptions = {}): ExternalWakeSource {
  const minBackoffMs = opts.minBackoffMs ?? 250;
  const maxBackoffMs = Math.max(minBackoffMs, opts.maxBackoffMs ?? 10_000);
  const heartbeatMs = opts.heartbeatMs ?? 5_000;
  const timeoutMs = opts.timeoutMs ?? 5_000;
  let connected = false;
  let reconnects = 0;
  const state = (): ExternalWakeState => ({ connected, reconnects });
  const setConnected = (value: boolean): void => {
    if (connected === value) return;
    connected = value;
    opts.onStateChange?.(state());
  };

  return {
    state,
    async start(wake) {
      let stopped = false;
      let everConnected = false;
      let failures = 0;
      let retry: NodeJS.Timeout | undefined;
      let heartbeat: NodeJS.Timeout | undefined;
      let current: { client: pg.PoolClient; release: (err?: Error | boolean) => void } | undefined;
      const onNotification = (): void => wake();

      const scheduleRetry = (): void => {
        if (stopped || retry) return;
        // "Equal jitter": half the capped exponential delay, plus a random share of the other half.
        const cap = Math.min(maxBackoffMs, minBackoffMs * 2 ** Math.min(failures, 30));
        failures++;
        retry = setTimeout(
          () => {
            retry = undefined;
            void connect();
          },
          cap / 2 + Math.random() * (cap / 2),
        );
      };

      const lose = (client: pg.PoolClient, err: Error): void => {
        if (current?.client !== client) return;
        const { release } = current;
        current = undefined;
        clearInterval(heartbeat);
        heartbeat = undefined;
        setConnected(false);
        opts.onError?.(err);
        release(err); // a truthy error makes the pool destroy the client instead of reusing it
        scheduleRetry();
      };

      const connect = async (): Promise<void> => {
        if (stopped) return;
        let c: pg.PoolClient;
        try {
          // pool.connect() cannot be cancelled: a client that arrives after the timeout is destroyed.
          c = await withTimeout(pool.connect(), timeoutMs, 'connecting for LISTEN', (late) => late.release(true));
        } catch (err) {
          opts.onError?.(err);
          scheduleRetry();
          return;
        }
        if (stopped) {
          c.release();
          return;
        }
        let released = false;
        const release = (err?: Error | boolean): void => {
          if (released) return;
          released = true;
          c.off('notification', onNotification);
          c.release(err);
        };
        current = { client: c, release };
        c.on('notification', onNotification);
        // Kept for the client's whole life: an error after release (the server ending the session) must
        // not become an uncaught exception.
        c.on('error', (err) => lose(c, err));
        try {
          await withTimeout(c.query(`LISTEN ${OUTBOX_CHANNEL}`), timeoutMs, 'LISTEN');
        } catch (err) {
          lose(c, err instanceof Error ? err : new Error(String(err)));
          return;
        }
        if (current?.client !== c) return;
        if (stopped) {
          current = undefined;
          release(true);
          return;
        }
        failures = 0;
        if (everConnected) reconnects++;
        everConnected = true;
        setConnected(true);
        let beating = false;
        heartbeat = setInterval(() => {
          if (beating) return;
          beating = true;
          withTimeout(c.query('SELECT 1'), timeoutMs, 'LISTEN heartbeat')
            .catch((err: unknown) => lose(c, err instanceof Error ? err : new Error(String(err))))
            .finally(() => (beating = false));
        }, heartbeatMs);
        heartbeat.unref();
        wake(); // rows may have landed while we were away
      };

      await connect();
      return async () => {
        stopped = true;
        clearTimeout(retry);
        clearInterval(heartbeat);
        const held = current;
        current = undefined;
        setConnected(false);
        if (held) {
          await withTimeout(held.client.query(`UNLISTEN ${OUTBOX_CHANNEL}`), timeoutMs, 'UNLISTEN').catch(() => undefined);
          held.release(true);
        }
      };
    },
  };
}
