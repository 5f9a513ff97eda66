import { sql } from 'kysely';
import type { Db } from '../../db.ts';

export interface OutboxRetention {
  /** Keep at most this many of the newest rows (at least 1). */
  readonly retainRows: number;
  /** Drop rows older than this many hours (0: no age limit). The newest row is kept whatever its age. */
  readonly retainHours: number;
}

export const DEFAULT_OUTBOX_RETENTION: OutboxRetention = Object.freeze({ retainRows: 10_000, retainHours: 24 });
/** How often the control plane prunes (default 10 minutes). */
export const DEFAULT_OUTBOX_PRUNE_INTERVAL_MS = 10 * 60_000;
/** Rows deleted per statement, so a large backlog never holds one long lock. */
const DELETE_BATCH = 5_000;

export interface PruneResult {
  /** Rows deleted. */
  readonly deleted: number;
  /** The oldest sequence number still in the outbox (0 when it is empty). */
  readonly oldestSeq: number;
  /** The newest (the current config version; never deleted). */
  readonly newestSeq: number;
}

/**
 * Deletes old config-outbox rows. Only ever a prefix of the outbox goes (every row below one cut-off
 * sequence number), so a node that resumes from a retained version still gets every later delta; a
 * node whose version is gone gets a full snapshot (`deltasSince` answers null). The newest row is
 * always kept: its seq is the current config version (`buildSnapshot` reads `max(seq)`).
 */
export async function pruneOutbox(db: Db, retention: OutboxRetention = DEFAULT_OUTBOX_RETENTION): Promise<PruneResult> {
  const retainRows = Math.max(1, Math.floor(retention.retainRows));
  const newest = await db
    .selectFrom('configOutbox')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .executeTakeFirst();
  const newestSeq = newest?.seq == null ? 0 : Number(newest.seq);
  if (newestSeq === 0) return { deleted: 0, oldestSeq: 0, newestSeq: 0 };

  // Count limit: the retainRows newest rows (sequence numbers may have gaps, so find the row itself).
  const nth = await db
    .selectFrom('configOutbox')
    .select('seq')
    .where('seq', '<=', newestSeq)
    .orderBy('seq', 'desc')
    .offset(retainRows - 1)
    .limit(1)
    .executeTakeFirst();
  let cutoff = nth ? Number(nth.seq) : 0; // delete seq < cutoff

  // Age limit: every row up to the newest one written before the threshold (a prefix by seq, never a hole).
  if (retention.retainHours > 0) {
    const threshold = new Date(Date.now() - retention.retainHours * 3_600_000);
    const aged = await db
      .selectFrom('configOutbox')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .where('createdAt', '<', threshold)
      .executeTakeFirst();
    if (aged?.seq != null) cutoff = Math.max(cutoff, Number(aged.seq) + 1);
  }
  cutoff = Math.min(cutoff, newestSeq); // the newest row stays

  let deleted = 0;
  if (cutoff > 0) {
    for (;;) {
      const result = await db
        .deleteFrom('configOutbox')
        .where('seq', 'in', (eb) => eb.selectFrom('configOutbox').select('seq').where('seq', '<', cutoff).orderBy('seq').limit(DELETE_BATCH))
        .executeTakeFirst();
      const n = Number(result.numDeletedRows);
      deleted += n;
      if (n < DELETE_BATCH) break;
    }
  }
  const oldest = await db
    .selectFrom('configOutbox')
    .select((eb) => eb.fn.min('seq').as('seq'))
    .executeTakeFirst();
  return { deleted, oldestSeq: oldest?.seq == null ? 0 : Number(oldest.seq), newestSeq };
}

export interface OutboxPruner {
  /** Prunes now (waits for a prune already running instead of starting a second). */
  runNow(): Promise<PruneResult | undefined>;
  /** Stops the timer and waits for a prune in progress. */
  stop(): Promise<void>;
}

export interface OutboxPrunerOptions extends Partial<OutboxRetention> {
  /** Interval between prunes (default 10 minutes). The first runs after min(interval, 1 minute). */
  readonly intervalMs?: number;
  readonly onPruned?: (result: PruneResult) => void;
  readonly onError?: (err: unknown) => void;
}

/** Prunes the outbox periodically. Safe with several replicas: each delete only removes a prefix. */
export function startOutboxPruner(db: Db, opts: OutboxPrunerOptions = {}): OutboxPruner {
  const retention: OutboxRetention = {
    retainRows: opts.retainRows ?? DEFAULT_OUTBOX_RETENTION.retainRows,
    retainHours: opts.retainHours ?? DEFAULT_OUTBOX_RETENTION.retainHours,
  };
  const intervalMs = opts.intervalMs ?? DEFAULT_OUTBOX_PRUNE_INTERVAL_MS;
  let inFlight: Promise<PruneResult | undefined> | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const runNow = (): Promise<PruneResult | undefined> => {
    if (stopped) return Promise.resolve(undefined);
    inFlight ??= pruneOutbox(db, retention)
      .then((result) => {
        opts.onPruned?.(result);
        return result;
      })
      .catch((err: unknown) => {
        opts.onError?.(err);
        return undefined;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };
  const schedule = (ms: number): void => {
    if (stopped) return;
    // setTimeout takes at most ~24.8 days: longer intervals are clamped.
    timer = setTimeout(
      () => {
        void runNow().finally(() => schedule(intervalMs));
      },
      Math.min(Math.max(ms, 1), 2_147_483_647),
    );
    timer.unref();
  };
  schedule(Math.min(intervalMs, 60_000));

  return {
    runNow,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}

/** Rows currently in the outbox (tests, diagnostics). */
export async function outboxRowCount(db: Db): Promise<number> {
  const row = await sql<{ n: string | number }>`select count(*) as n from config_outbox`.execute(db);
  return Number(row.rows[0]?.n ?? 0);
}
