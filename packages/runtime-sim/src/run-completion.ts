import type { ServerResponse } from 'node:http';
import type { Completion } from './generate-text.ts';
import type { KvCache, KvLease } from './kv-cache.ts';
import type { PrefillLanes } from './prefill-lanes.ts';
import type { SimFaults } from './options.ts';
import type { Scheduler } from './scheduler.ts';
import type { RequestLogEntry, SimStats } from './sim-stats.ts';
import { sendError } from './http-io.ts';

export interface CompletionRun {
  readonly res: ServerResponse;
  readonly entry: RequestLogEntry;
  readonly completion: Completion;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly created: number;
  /** Fixed part of the time to first token, ms (the prefill of uncached prompt tokens comes on top). */
  readonly ttftMs: number;
  /** Inter-token latency now, ms (it grows with the running batch). */
  readonly itlMs: () => number;
  readonly faults: SimFaults;
  /** The prompt's chained block hashes (prefix caching). */
  readonly blockHashes: readonly number[];
}

/** The simulated engine's shared parts: KV memory and prefill compute. */
export interface Engine {
  readonly kv: KvCache;
  readonly prefill: PrefillLanes;
}

const INFINITY = Number.POSITIVE_INFINITY;
const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

/**
 * Queues one completion for a batch slot, then answers it as JSON or SSE with the latency model,
 * the faults that were active when it arrived, and abort handling when the client goes away.
 */
export function runCompletion(scheduler: Scheduler, stats: SimStats, engine: Engine, run: CompletionRun): void {
  const { res, entry, completion, stream } = run;
  let ttftMs = run.ttftMs;
  let itlMs = 0;
  let lease: KvLease | null = null;
  const pieces = completion.pieces;
  const n = pieces.length;
  const cutAt = run.faults.cutAfterTokens ?? INFINITY;
  const stallAt = run.faults.hangAfterTokens ?? INFINITY;
  let state: 'queued' | 'running' | 'stalled' | 'done' = 'queued';
  let timer: NodeJS.Timeout | undefined;
  let startedAt = 0;
  let i = 0;
  let batch = '';

  const release = () => {
    state = 'done';
    lease?.release();
    scheduler.release();
  };
  const ensureHead = () => {
    if (!res.headersSent) res.writeHead(200, SSE_HEADERS);
  };

  // --- JSON: everything at once after the simulated generation time.
  const jsonLimit = Math.min(n, cutAt, stallAt);
  const tokensByTime = () => {
    const elapsed = performance.now() - startedAt;
    if (elapsed < ttftMs) return 0;
    return itlMs === 0 ? jsonLimit : Math.min(jsonLimit, 1 + Math.floor((elapsed - ttftMs) / itlMs));
  };
  const finishJson = () => {
    timer = undefined;
    if (cutAt < n) {
      stats.generated(entry, cutAt);
      stats.fail(entry, 0, 'cut');
      release();
      res.destroy();
      return;
    }
    if (stallAt < n) {
      stats.generated(entry, stallAt);
      state = 'stalled';
      return;
    }
    stats.generated(entry, n);
    stats.interTokens(n - 1, itlMs / 1000);
    stats.finish(entry, completion.finishReason);
    const promptTokens = entry.promptTokens;
    const body = JSON.stringify({
      id: entry.id,
      object: 'chat.completion',
      created: run.created,
      model: entry.model,
      choices: [{ index: 0, message: { role: 'assistant', content: completion.text }, logprobs: null, finish_reason: completion.finishReason }],
      usage: { prompt_tokens: promptTokens, completion_tokens: n, total_tokens: promptTokens + n },
    });
    release();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };

  // --- SSE: one chunk per token, written as it is produced.
  const head = `data: {"id":${JSON.stringify(entry.id)},"object":"chat.completion.chunk","created":${run.created},"model":${JSON.stringify(entry.model)},"choices":`;
  const tokenTail = '},"logprobs":null,"finish_reason":null}]}\n\n';
  const finishStream = (pending: string) => {
    let out = pending;
    if (n === 0) out += `${head}[{"index":0,"delta":{"role":"assistant","content":""${tokenTail}`;
    out += `${head}[{"index":0,"delta":{},"logprobs":null,"finish_reason":"${completion.finishReason}"}]}\n\n`;
    if (run.includeUsage) {
      const p = entry.promptTokens;
      out += `${head}[],"usage":{"prompt_tokens":${p},"completion_tokens":${n},"total_tokens":${p + n}}}\n\n`;
    }
    stats.finish(entry, completion.finishReason);
    release();
    res.end(`${out}data: [DONE]\n\n`);
  };
  // Writes tokens until the stream must wait, finish, stall or be cut; says which of the last two follow.
  const emitLoop = (): 'wait' | 'finish' | 'cut' => {
    for (;;) {
      if (i >= n) return 'finish';
      if (i >= cutAt) return 'cut';
      if (i >= stallAt) {
        state = 'stalled';
        return 'wait';
      }
      const delta = i === 0 ? '[{"index":0,"delta":{"role":"assistant","content":' : '[{"index":0,"delta":{"content":';
      batch += head + delta + JSON.stringify(pieces[i]) + tokenTail;
      i++;
      stats.generated(entry, 1);
      if (i === 1) lease?.prefilled();
      itlMs = run.itlMs();
      if (itlMs > 0 && i < n && i < cutAt && i < stallAt) {
        timer = setTimeout(emit, itlMs);
        return 'wait';
      }
    }
  };
  const emit = () => {
    timer = undefined;
    // A burst of chunks produced at the same instant (zero latency) leaves in one write.
    const next = emitLoop();
    const out = batch;
    batch = '';
    if (next === 'finish') return finishStream(out);
    if (out.length > 0) res.write(out);
    if (next === 'cut') {
      stats.fail(entry, 200, 'cut');
      release();
      // Flush what was written, then close without [DONE], like a crashed runtime.
      const socket = res.socket;
      if (socket) socket.end(() => socket.destroy());
      else res.destroy();
    }
  };

  const start = () => {
    state = 'running';
    startedAt = performance.now();
    const cached = lease?.cachedTokens ?? 0;
    stats.prefill(entry, cached);
    // Cached prompt blocks are not computed again: only the rest queues for the engine's prefill.
    ttftMs += engine.prefill.schedule(entry.promptTokens - cached);
    if (stream) ensureHead();
    else {
      itlMs = run.itlMs();
      const prefilled = setTimeout(() => lease?.prefilled(), ttftMs);
      prefilled.unref();
    }
    const first = stream ? emit : finishJson;
    const delay = stream ? ttftMs : ttftMs + Math.max(0, jsonLimit - 1) * itlMs;
    if (delay > 0) timer = setTimeout(first, delay);
    else first();
  };
  // Admitted only with KV blocks for the prompt and the whole completion (so it is never preempted).
  const job = Object.assign(start, {
    fits: () => {
      lease = engine.kv.tryAdmit(run.blockHashes, entry.promptTokens, n);
      return lease !== null;
    },
  });

  res.on('close', () => {
    if (state === 'done') return;
    if (state === 'queued') scheduler.cancel(job);
    else {
      if (timer) clearTimeout(timer);
      if (!stream && state === 'running') stats.generated(entry, tokensByTime());
    }
    stats.abort(entry);
    if (state === 'queued') state = 'done';
    else release();
  });

  if (!scheduler.submit(job)) {
    state = 'done';
    stats.reject(entry, 503);
    sendError(res, 'service_unavailable', 'The server is overloaded: too many requests are waiting for a batch slot.');
    return;
  }
  // Like vLLM, a stream's headers go out as soon as it is accepted, even while it waits for a slot.
  if (stream && (state as string) !== 'done' && i === 0) {
    ensureHead();
    res.flushHeaders();
  }
}
