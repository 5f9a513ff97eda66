import { request } from 'undici';
import type { UsageRecord } from '@infer/shared';

/** Where the request path drops usage records; must not block or throw. */
export interface UsageSink {
  record(record: UsageRecord): void;
}

export interface UsageReporter extends UsageSink {
  /** Sends everything pending now; resolves when sent or when the attempt failed (records are kept). */
  flush(): Promise<void>;
  /** Records waiting to be sent. */
  pending(): number;
  /** Stops the timer and makes a last flush. */
  close(): Promise<void>;
}

export interface UsageReporterOptions {
  /** Control-plane base URL. */
  readonly url: string;
  readonly nodeToken: string;
  readonly flushMs?: number;
  readonly maxBatch?: number;
  /** Records kept while the control plane is away; the oldest are dropped beyond it. */
  readonly maxPending?: number;
  readonly onError?: (err: unknown) => void;
}

/** Buffers usage records and POSTs `{ records }` batches to the control plane, retrying failures. */
export function createUsageReporter(opts: UsageReporterOptions): UsageReporter {
  const endpoint = `${opts.url.replace(/\/+$/, '')}/internal/v1/usage`;
  const authorization = `Bearer ${opts.nodeToken}`;
  const flushMs = opts.flushMs ?? 1000;
  const maxBatch = opts.maxBatch ?? 500;
  const maxPending = opts.maxPending ?? 200_000;
  let buffer: UsageRecord[] = [];
  let inFlight: Promise<void> | null = null;
  let closed = false;
  let dropped = 0;

  const send = async (batch: UsageRecord[]): Promise<boolean> => {
    try {
      const res = await request(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization },
        body: JSON.stringify({ records: batch }),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) return true;
      opts.onError?.(new Error(`usage ingest answered HTTP ${res.statusCode}`));
    } catch (err) {
      opts.onError?.(err);
    }
    return false;
  };

  const drain = async (): Promise<void> => {
    while (buffer.length > 0) {
      const batch = buffer.slice(0, maxBatch);
      const droppedBefore = dropped;
      if (!(await send(batch))) return; // keep them; the next tick retries (ingest is idempotent)
      // New records were appended after the batch; overflow may have dropped some of its head meanwhile.
      buffer = buffer.slice(Math.max(0, batch.length - (dropped - droppedBefore)));
    }
  };

  const flush = (): Promise<void> => {
    if (inFlight === null) {
      inFlight = drain().finally(() => {
        inFlight = null;
      });
    }
    return inFlight;
  };

  const timer = setInterval(() => {
    if (buffer.length > 0) void flush();
  }, flushMs);
  timer.unref();

  return {
    record(r) {
      buffer.push(r);
      if (buffer.length > maxPending) {
        dropped += buffer.length - maxPending;
        buffer.splice(0, buffer.length - maxPending);
      }
      if (buffer.length >= maxBatch && !closed) void flush();
    },
    async flush() {
      await flush();
      // A flush already running may have started before the newest records: go again once.
      if (buffer.length > 0) await flush();
    },
    pending: () => buffer.length,
    async close() {
      closed = true;
      clearInterval(timer);
      if (inFlight) await inFlight;
      await flush();
    },
  };
}
