import { performance } from 'node:perf_hooks';
import type { Dispatcher, Pool } from 'undici';

/** One kind of request the generator sends again and again (built once, reused by every send). */
/**
 * A bench request's messages: one short question, or (`promptKib` > 0) a multi-turn conversation of about that many
 * KiB, as a chat client sends its whole history on each turn (accented text, CJK and quotes, as real prompts have).
 */
export function chatMessages(promptKib: number): { role: string; content: string }[] {
  const question = { role: 'user', content: 'Write a haiku about latency.' };
  if (promptKib <= 0) return [question];
  const messages = [{ role: 'system', content: 'You are a concise assistant.' }];
  const turn = 'Explain how a "KV cache" speeds up decoding, with one example (café, naïve, 東京). ';
  for (let bytes = 0, i = 0; bytes < promptKib * 1024; i++) {
    const content = turn.repeat(4);
    messages.push({ role: i % 2 === 0 ? 'user' : 'assistant', content });
    bytes += Buffer.byteLength(content) + 32;
  }
  messages.push(question);
  return messages;
}

export interface RequestSpec {
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly stream: boolean;
  /** A string a correct response body must contain (e.g. the model name); the request counts as an error otherwise. */
  readonly expect: Buffer;
}

/** Latency samples in milliseconds: a growable Float64Array, sorted once when read. */
export class Samples {
  #data = new Float64Array(4096);
  #n = 0;
  #sorted = true;

  add(ms: number): void {
    if (this.#n === this.#data.length) {
      const next = new Float64Array(this.#data.length * 2);
      next.set(this.#data);
      this.#data = next;
    }
    this.#data[this.#n++] = ms;
    this.#sorted = false;
  }

  get count(): number {
    return this.#n;
  }

  /** Nearest-rank percentile (p in 0..100); NaN when empty. */
  percentile(p: number): number {
    if (this.#n === 0) return Number.NaN;
    if (!this.#sorted) {
      this.#data.subarray(0, this.#n).sort();
      this.#sorted = true;
    }
    const rank = Math.min(this.#n - 1, Math.max(0, Math.ceil((p / 100) * this.#n) - 1));
    return this.#data[rank] ?? Number.NaN;
  }
}

/** What one measured case saw. */
export interface CaseStats {
  readonly latency: Samples;
  /** Time to first body byte (streams only). */
  readonly ttfb: Samples;
  ok: number;
  non2xx: number;
  errors: number;
  /** The first failure seen, for the report (status and a body snippet, or the error message). */
  firstFailure: string | null;
  elapsedMs: number;
}

export function createStats(): CaseStats {
  return { latency: new Samples(), ttfb: new Samples(), ok: 0, non2xx: 0, errors: 0, firstFailure: null, elapsedMs: 0 };
}

const TAIL = 64;
const DONE = Buffer.from('[DONE]');

/** Dispatch handler for one request: no streams, no promises, a few fields of state. */
class MeasureHandler implements Dispatcher.DispatchHandler {
  readonly spec: RequestSpec;
  readonly stats: CaseStats;
  readonly start: number;
  readonly done: () => void;
  status = 0;
  firstByte = 0;
  found = false;
  tail: Buffer | null = null;
  snippet = '';

  constructor(spec: RequestSpec, stats: CaseStats, start: number, done: () => void) {
    this.spec = spec;
    this.stats = stats;
    this.start = start;
    this.done = done;
  }

  onRequestStart(): void {}

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.firstByte === 0) this.firstByte = performance.now();
    if (this.status < 200 || this.status > 299) {
      if (this.snippet.length < 300) this.snippet += chunk.toString('utf8', 0, 300);
      return;
    }
    if (!this.found && chunk.includes(this.spec.expect)) this.found = true;
    if (this.spec.stream) {
      // Keep the last bytes only: enough to see the final `data: [DONE]` even across a chunk boundary.
      this.tail = chunk.length >= TAIL || this.tail === null ? chunk.subarray(-TAIL) : Buffer.concat([this.tail, chunk]).subarray(-TAIL);
    }
  }

  onResponseEnd(): void {
    const end = performance.now();
    const s = this.stats;
    if (this.status < 200 || this.status > 299) {
      s.non2xx++;
      s.firstFailure ??= `HTTP ${this.status}: ${this.snippet.slice(0, 200)}`;
    } else if (!this.found || (this.spec.stream && (this.tail === null || !this.tail.includes(DONE)))) {
      s.errors++;
      s.firstFailure ??= this.found ? 'stream ended without [DONE]' : `body lacks "${this.spec.expect.toString()}"`;
    } else {
      s.ok++;
      s.latency.add(end - this.start);
      if (this.spec.stream) s.ttfb.add(this.firstByte - this.start);
    }
    this.done();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.stats.errors++;
    this.stats.firstFailure ??= `${err.name}: ${err.message}`;
    // Errors can be reported synchronously from dispatch(); deferring keeps a closed loop from recursing.
    setImmediate(this.done);
  }
}

// Every request is bounded in time, so every run ends.
const REQUEST_TIMEOUT_MS = 30_000;

function send(pool: Pool, spec: RequestSpec, stats: CaseStats, start: number, done: () => void): void {
  pool.dispatch(
    {
      path: spec.path,
      method: 'POST',
      headers: spec.headers,
      body: spec.body,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS,
    },
    new MeasureHandler(spec, stats, start, done),
  );
}

/**
 * Open loop: request i is due at t0 + i/rate whatever happened before, and its latency counts from that
 * due time, so a slow server shows up as queueing in the numbers instead of silently lowering the rate.
 */
export function runOpenLoop(pool: Pool, spec: RequestSpec, rate: number, durationS: number): Promise<CaseStats> {
  const stats = createStats();
  const total = Math.max(1, Math.round(rate * durationS));
  const interval = 1000 / rate;
  const t0 = performance.now() + 2;
  let sent = 0;
  let finished = 0;
  return new Promise((resolve) => {
    const onDone = (): void => {
      if (++finished === total) {
        stats.elapsedMs = performance.now() - t0;
        resolve(stats);
      }
    };
    const tick = (): void => {
      const now = performance.now();
      while (sent < total) {
        const due = t0 + sent * interval;
        if (due > now) break;
        sent++;
        send(pool, spec, stats, due, onDone);
      }
      if (sent < total) setTimeout(tick, Math.max(0, t0 + sent * interval - performance.now()));
    };
    setTimeout(tick, 2);
  });
}

/** Closed loop: `connections` senders, each sends its next request when the previous one ends, until the deadline. */
export function runClosedLoop(pool: Pool, spec: RequestSpec, connections: number, durationS: number): Promise<CaseStats> {
  const stats = createStats();
  const t0 = performance.now();
  const deadline = t0 + durationS * 1000;
  let active = connections;
  return new Promise((resolve) => {
    const next = (): void => {
      const now = performance.now();
      if (now >= deadline) {
        if (--active === 0) {
          stats.elapsedMs = now - t0;
          resolve(stats);
        }
        return;
      }
      send(pool, spec, stats, now, next);
    };
    for (let i = 0; i < connections; i++) next();
  });
}

/** Correct responses per second over the case's elapsed time (failures are counted apart, never as throughput). */
export function requestsPerSecond(s: CaseStats): number {
  return s.elapsedMs > 0 ? (s.ok * 1000) / s.elapsedMs : 0;
}

/** Closed loop by count: exactly `total` requests with `connections` senders (the soak test). */
export function runCount(pool: Pool, spec: RequestSpec, connections: number, total: number): Promise<CaseStats> {
  const stats = createStats();
  const t0 = performance.now();
  let sent = 0;
  let finished = 0;
  return new Promise((resolve) => {
    const next = (): void => {
      if (sent < total) {
        sent++;
        send(pool, spec, stats, performance.now(), onDone);
      }
    };
    const onDone = (): void => {
      if (++finished === total) {
        stats.elapsedMs = performance.now() - t0;
        resolve(stats);
      } else next();
    };
    for (let i = 0; i < Math.min(connections, total); i++) next();
  });
}
