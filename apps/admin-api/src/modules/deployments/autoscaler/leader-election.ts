// One active autoscaler across control-plane replicas: the leader holds a PostgreSQL session advisory
// lock on a dedicated connection. When the leader dies its connection closes, PostgreSQL releases the
// lock, and the next follower's attempt (every `retryMs`) takes it. On PGlite the one process leads.
//
// A lease bounds the rest. The lock's session ends on the server once it has been idle `leaseMs` (PostgreSQL's
// idle_session_timeout; the leader pings every `retryMs`), so a leader that is frozen or cut off from the database
// loses the lock within `leaseMs` even when its TCP connection never closes. The leader acts only while its last
// confirmed ping is under half a lease old: a process frozen past its lease and thawed acts on nothing before it
// learns it lost. A ping that fails (the database slow or frozen for a moment) is not a loss: the session and its
// lock hold, and leadership resumes once a ping answers, unless none has for a whole lease.
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
  /** The lease (default 10 s, at least 4 pings): the lock's session ends after this long without a ping. */
  readonly leaseMs?: number;
  readonly log?: LeaderLog;
  /** The clock (tests). */
  readonly now?: () => number;
}

export function createAdvisoryLeader(opts: AdvisoryLeaderOptions): LeaderElection {
  const key = opts.lockKey ?? AUTOSCALER_LOCK_KEY;
  const retryMs = opts.retryMs ?? 1_000;
  const leaseMs = Math.max(opts.leaseMs ?? 10_000, retryMs * 4);
  const now = opts.now ?? (() => performance.now());
  let client: pg.PoolClient | undefined;
  let leading = false;
  /** When a ping (or the lock) last answered on the lock's session. */
  let confirmedAt = 0;
  /** A ping failed and none has answered since (logged once). */
  let unconfirmed = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let handlers: LeaderHandlers | undefined;
  let busy: Promise<void> = Promise.resolve();
  /**
   * The new leader's recovery (`onAcquire`), run beside the pings: a recovery longer than the lease must not let the
   * session go idle and lose the lock it recovers for. A loss waits for it, so the handlers never overlap.
   */
  let acquiring: Promise<void> = Promise.resolve();

  async function drop(err?: unknown): Promise<void> {
    const c = client;
    client = undefined;
    c?.release(err instanceof Error ? err : true); // destroyed, never back in the pool: the lock goes with it
    if (leading) {
      leading = false;
      unconfirmed = false;
      opts.log?.warn({ err }, 'autoscaler leadership lost');
      await acquiring;
      await handlers?.onLose();
    }
  }

  async function connect(): Promise<pg.PoolClient> {
    const c = await opts.pool.connect();
    c.on('error', (err) => {
      if (c === client) busy = busy.then(() => drop(err));
    });
    // The server ends the session (and its lock) after a lease without a query. PostgreSQL 14 and later; an older
    // server keeps the session until its TCP connection closes.
    await c.query(`set idle_session_timeout = ${Math.round(leaseMs)}`).catch((err: unknown) => {
      opts.log?.warn({ err }, 'this PostgreSQL has no idle_session_timeout: a frozen leader keeps the lock until its connection closes');
    });
    return c;
  }

  async function attempt(): Promise<void> {
    if (closed) return;
    try {
      client ??= await connect();
      const queryTimeout = Math.max(1_000, retryMs * 2);
      // The server's idle clock restarts when it reads the query: the lease counts from the send, not the answer.
      const sentAt = now();
      if (leading) {
        try {
          await client.query({ text: 'select 1', query_timeout: queryTimeout } as pg.QueryConfig);
        } catch (err) {
          // The session may still hold the lock (the database slow or frozen): pause, and give up only after a lease.
          if (client !== undefined && now() - confirmedAt < leaseMs) {
            if (!unconfirmed) opts.log?.warn({ err }, 'autoscaler leadership unconfirmed: acting paused until the database answers');
            unconfirmed = true;
            return;
          }
          throw err;
        }
        confirmedAt = sentAt;
        if (unconfirmed) opts.log?.info({ lockKey: key }, 'autoscaler leadership confirmed again');
        unconfirmed = false;
        return;
      }
      const res = await client.query<{ locked: boolean }>({
        text: 'select pg_try_advisory_lock($1) as locked',
        values: [key],
        query_timeout: queryTimeout,
      } as pg.QueryConfig);
      if (res.rows[0]?.locked && !closed) {
        leading = true;
        confirmedAt = sentAt;
        opts.log?.info({ lockKey: key }, 'autoscaler leadership acquired');
        acquiring = (handlers?.onAcquire() ?? Promise.resolve()).catch((err: unknown) => opts.log?.warn({ err }, 'autoscaler recovery after acquiring failed'));
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
    // Within half a lease of the last answer: the server cannot have released the lock yet.
    isLeader: () => leading && !unconfirmed && now() - confirmedAt < leaseMs / 2,
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
        await acquiring;
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
