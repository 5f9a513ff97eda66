import { trimTrailingSlashes } from '@infer/shared';
import { request } from 'undici';
import type { UsageRecord } from '@infer/shared';
import { openUsageSpool, type SpoolEntry, type UsageSpool } from './usage-spool.ts';

/** Where the request path drops usage records; must not block or throw. */
export interface UsageSink {
  record(record: UsageRecord): void;
  /**
   * Calls `fn` once every record given so far is durable (in the node's spool, so a kill -9 of the process no
   * longer loses it): the end of an answer waits on this. Absent: nothing to wait for, call `fn` at once.
   */
  whenDurable?(fn: () => void): void;
}

/** Runs `fn` once the sink's records are durable (at once for a sink that keeps nothing). */
export function afterDurable(sink: UsageSink, fn: () => void): void {
  if (sink.whenDurable === undefined) fn();
  else sink.whenDurable(fn);
}

export interface UsageReporter extends UsageSink {
  /** Sends everything pending now; resolves when sent or when the attempt failed (records are kept). */
  flush(): Promise<void>;
  /** Records waiting to be sent. */
  pending(): number;
  /** Records an earlier process left in the spool, queued for sending at start. */
  readonly recovered: number;
  /** Stops the timer, makes a last attempt, syncs the spool; resolves with the records left unsent. */
  close(): Promise<{ remaining: number }>;
}

export interface UsageReporterOptions {
  /** Control-plane base URL. */
  readonly url: string;
  readonly nodeToken: string;
  readonly flushMs?: number;
  readonly maxBatch?: number;
  /**
   * Directory of the durable spool (see usage-spool.ts): records survive a crash or a stop while the
   * control plane is away and are replayed at the next start. Without it, records live in memory only.
   */
  readonly spoolDir?: string;
  /** Spool group-commit interval (fdatasync), default 100 ms. */
  readonly fsyncMs?: number;
  /**
   * Memory-only mode: records kept while the control plane is away; the oldest are dropped beyond it.
   * With a spool: records held in memory; beyond it they stay on disk only until the queue drains.
   */
  readonly maxPending?: number;
  readonly onError?: (err: unknown) => void;
}

const MAX_BACKOFF_MS = 5000;

/**
 * Spools usage records and POSTs `{ records }` batches to the control plane, retrying failures with
 * backoff. The control plane dedupes on request id, so a batch sent twice (a crash between its
 * acknowledgement and the spool's truncation) bills once.
 */
export function createUsageReporter(opts: UsageReporterOptions): UsageReporter {
  const endpoint = `${trimTrailingSlashes(opts.url)}/internal/v1/usage`;
  const authorization = `Bearer ${opts.nodeToken}`;
  const flushMs = opts.flushMs ?? 1000;
  const maxBatch = opts.maxBatch ?? 500;
  const maxPending = opts.maxPending ?? 200_000;
  const spool: UsageSpool | null = opts.spoolDir !== undefined ? openUsageSpool(opts.spoolDir, { fsyncMs: opts.fsyncMs, onError: opts.onError }) : null;
  let queue: SpoolEntry[] = spool ? [...spool.recovered] : [];
  const recovered = queue.length;
  let inFlight: Promise<void> | null = null;
  let closed = false;
  let dropped = 0;
  /** Records on disk only (the spool spills while the in-memory queue is full). */
  let spilled = 0;
  // A 400 names no record: halve the batch until the one record it refuses is alone.
  let batchSize = maxBatch;
  let backoffMs = 0;
  let retryAt = 0;

  /** `ok` names the batch's records the control plane rejected (its answer's `rejectedRequestIds`). */
  type Sent = { readonly kind: 'ok'; readonly refusedIds: ReadonlySet<string> } | { readonly kind: 'retry' } | { readonly kind: 'refused' };
  const send = async (batch: readonly SpoolEntry[]): Promise<Sent> => {
    try {
      const res = await request(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization },
        // The spooled records are JSON already.
        body: `{"records":[${batch.map((e) => e.json).join(',')}]}`,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const text = await res.body.text();
      if (res.statusCode >= 200 && res.statusCode < 300) {
        let rejected = 0;
        let refusedIds: ReadonlySet<string> = new Set();
        try {
          const answer = JSON.parse(text) as { rejected?: unknown; rejectedRequestIds?: unknown };
          rejected = Number(answer.rejected ?? 0);
          if (Array.isArray(answer.rejectedRequestIds)) refusedIds = new Set(answer.rejectedRequestIds.filter((id): id is string => typeof id === 'string'));
        } catch {
          // an answer without the counts: the batch is stored
        }
        if (rejected > 0) {
          opts.onError?.(
            new Error(
              `control plane rejected ${rejected} usage record(s) (unknown key, tenant mismatch or implausible counts); kept in ${opts.spoolDir ?? 'nowhere (memory-only reporter)'}/rejected.ndjson`,
            ),
          );
        }
        return { kind: 'ok', refusedIds };
      }
      opts.onError?.(new Error(`usage ingest answered HTTP ${res.statusCode}`));
      return res.statusCode === 400 ? { kind: 'refused' } : { kind: 'retry' };
    } catch (err) {
      opts.onError?.(err);
      return { kind: 'retry' };
    }
  };

  const failed = (): void => {
    backoffMs = Math.min(Math.max(backoffMs * 2, flushMs), MAX_BACKOFF_MS);
    retryAt = Date.now() + backoffMs;
  };

  /** Answers waiting for their records to reach the spool (`whenDurable`), and the pending commit. */
  let waiting: (() => void)[] = [];
  let commitScheduled = false;
  const commit = (): void => {
    commitScheduled = false;
    try {
      spool?.commit();
    } catch (err) {
      opts.onError?.(err); // disk trouble: the records are still queued in memory and will be sent
    }
    const fns = waiting;
    waiting = [];
    for (const fn of fns) fn();
  };
  const scheduleCommit = (): void => {
    if (commitScheduled) return;
    commitScheduled = true;
    // Once per event-loop turn: the records of every answer that ended in this turn go out in one write(2).
    setImmediate(commit);
  };

  /**
   * Sends the queue in batches: everything (`all`: the timer, flush(), close()), or only while a whole batch is
   * waiting (a busy node: the rest goes with the next whole batch or the timer). A POST costs the node about 230 µs
   * of CPU up to 250 records and 530-680 µs with 500 (`node bench/usage-post.ts`), so sending whatever arrived during
   * the previous POST, as the drain once did (about 81 records at 10,000 requests/s), cost 3 µs per record instead
   * of about 1, and the control plane one ingest transaction per 81 records instead of per 500.
   */
  const drain = async (all: boolean): Promise<void> => {
    commit();
    for (;;) {
      if (queue.length === 0 && spilled > 0 && spool !== null) {
        queue = spool.takeSpilled();
        spilled = 0;
      }
      if (queue.length === 0 || (!all && queue.length < batchSize)) return;
      const batch = queue.slice(0, batchSize);
      const droppedBefore = dropped;
      const outcome = await send(batch);
      if (outcome.kind === 'retry') return failed(); // keep them; ingest is idempotent
      if (outcome.kind === 'refused' && batch.length > 1) {
        batchSize = Math.max(1, Math.floor(batch.length / 2));
        continue;
      }
      if (outcome.kind === 'refused') {
        spool?.quarantine(batch[0]!);
        opts.onError?.(new Error(`a usage record the control plane refuses was moved to ${opts.spoolDir ?? 'nowhere (memory-only reporter)'}/rejected.ndjson`));
      } else if (outcome.refusedIds.size === 0) spool?.ack(batch);
      else {
        // The records it named are kept for an operator, as a batch refused outright is; the rest are stored.
        const stored: SpoolEntry[] = [];
        for (const e of batch) {
          if (outcome.refusedIds.has(requestIdOf(e))) spool?.quarantine(e);
          else stored.push(e);
        }
        spool?.ack(stored);
      }
      backoffMs = 0;
      retryAt = 0;
      if (outcome.kind === 'ok') batchSize = maxBatch;
      // Memory-only overflow may have dropped some of the batch's head meanwhile.
      queue = queue.slice(Math.max(0, batch.length - (dropped - droppedBefore)));
    }
  };

  const flush = (all = true): Promise<void> => {
    if (inFlight === null) {
      inFlight = drain(all).finally(() => {
        inFlight = null;
      });
    }
    return inFlight;
  };

  const timer = setInterval(() => {
    if (queue.length + spilled > 0 && Date.now() >= retryAt) void flush();
  }, flushMs);
  timer.unref();
  if (queue.length > 0) void flush();

  return {
    recovered,
    record(r) {
      let entry: SpoolEntry | null = null;
      if (spool !== null && !closed) {
        try {
          if (spilled === 0 && queue.length >= maxPending) spool.beginSpill();
          if (spilled > 0 || queue.length >= maxPending) {
            spool.append(r);
            spilled++;
            scheduleCommit();
            return;
          }
          entry = spool.append(r);
          scheduleCommit();
        } catch (err) {
          opts.onError?.(err); // disk trouble: keep it in memory rather than lose it
        }
      }
      entry ??= { json: JSON.stringify(r), segment: null };
      queue.push(entry);
      if (spool === null && queue.length > maxPending) {
        dropped += queue.length - maxPending;
        queue.splice(0, queue.length - maxPending);
      }
      if (queue.length >= maxBatch && !closed && Date.now() >= retryAt) void flush(false);
    },
    whenDurable(fn) {
      if (commitScheduled) waiting.push(fn);
      else fn();
    },
    async flush() {
      retryAt = 0;
      await flush();
      // A flush already running may have started before the newest records: go again once.
      if (queue.length + spilled > 0 && retryAt === 0) await flush();
    },
    pending: () => queue.length + spilled,
    async close() {
      closed = true;
      clearInterval(timer);
      commit();
      if (inFlight) await inFlight;
      retryAt = 0;
      await flush();
      spool?.close();
      return { remaining: queue.length + spilled };
    },
  };
}

/** The request id of a spooled record (read only for the rare record the control plane rejected). */
function requestIdOf(e: SpoolEntry): string {
  try {
    const id = (JSON.parse(e.json) as { requestId?: unknown }).requestId;
    return typeof id === 'string' ? id : '';
  } catch {
    return '';
  }
}
