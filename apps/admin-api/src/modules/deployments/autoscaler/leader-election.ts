// One active autoscaler across control-plane replicas: the leader holds a PostgreSQL session advisory
// lock on a dedicated connection. When the leader dies its connection closes, PostgreSQL releases the
// lock, and the next follower's attempt (every `retryMs`) takes it. On PGlite the one process leads.
import type pg from 'pg';

export interface LeaderHandlers {
  /** This process just became leader (recover, then act). */
  onAcquire(): Promise<void>;
  /** This process lost leadership (stop acting at once). */
  onLose(): Promise<void>;
}

export interface LeaderElection {
  isLeader(): boolean;
  start(handlers: LeaderHandlers): void;
  /** Gives leadership up (the lock is released) and stops trying. */
  close(): Promise<void>;
}

export interface LeaderLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The single process of an embedded (PGlite) install always leads. */
export function createSoleLeader(): LeaderElection {
  let handlers: LeaderHandlers | undefined;
  let leading = false;
  return Object.freeze({
    isLeader: () => leading,
    start(h: LeaderHandlers): void {
      handlers = h;
      leading = true;
      void h.onAcquire();
    },
    async close(): Promise<void> {
      if (leading) {
        leading = false;
        await handlers?.onLose();
      }
    },
  });
}

/** Advisory lock key of the autoscaler ('infer' autoscaler); any 64-bit constant every replica shares. */
export const AUTOSCALER_LOCK_KEY = 7_311_204_010;

export interface AdvisoryLeaderOptions {
  readonly pool: pg.Pool;
  readonly lockKey?: number;
  /** How often a follower tries the lock and a leader checks its connection (default 1 s). */
  readonly retryMs?: number;
  readonly log?: LeaderLog;
}

export function createAdvisoryLeader(opts: AdvisoryLeaderOptions): LeaderElection {
  const key = opts.lockKey ?? AUTOSCALER_LOCK_KEY;
  const retryMs = opts.retryMs ?? 1_000;
  let client: pg.PoolClient | undefined;
  let leading = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let handlers: LeaderHandlers | undefined;
  let busy: Promise<void> = Promise.resolve();

  async function drop(err?: unknown): Promise<void> {
    const c = client;
    client = undefined;
    c?.release(err instanceof Error ? err : true); // destroyed, never back in the pool: the lock goes with it
    if (leading) {
      leading = false;
      opts.log?.warn({ err }, 'autoscaler leadership lost');
      await handlers?.onLose();
    }
  }

  async function attempt(): Promise<void> {
    if (closed) return;
    try {
      if (!client) {
        const c = await opts.pool.connect();
        c.on('error', (err) => void (busy = busy.then(() => drop(err))));
        client = c;
      }
      if (leading) {
        await client.query({ text: 'select 1', query_timeout: Math.max(1_000, retryMs * 2) } as pg.QueryConfig);
        return;
      }
      const res = await client.query<{ locked: boolean }>({
        text: 'select pg_try_advisory_lock($1) as locked',
        values: [key],
        query_timeout: Math.max(1_000, retryMs * 2),
      } as pg.QueryConfig);
      if (res.rows[0]?.locked && !closed) {
        leading = true;
        opts.log?.info({ lockKey: key }, 'autoscaler leadership acquired');
        await handlers?.onAcquire();
      }
    } catch (err) {
      await drop(err);
    }
  }

  function loop(): void {
    if (closed) return;
    busy = busy.then(attempt).finally(() => {
      if (!closed) timer = setTimeout(loop, retryMs);
    });
  }

  return Object.freeze({
    isLeader: () => leading,
    start(h: LeaderHandlers): void {
      handlers = h;
      loop();
    },
    async close(): Promise<void> {
      closed = true;
      clearTimeout(timer);
      await busy.catch(() => undefined);
      if (leading) {
        leading = false;
        await handlers?.onLose();
      }
      const c = client;
      client = undefined;
      if (c) {
        await c.query('select pg_advisory_unlock_all()').catch(() => undefined);
        c.release(true);
      }
    },
  });
}
