import { CLIENT_CLOSED } from '../client-gone.ts';
import type { ClientResponse } from '../front/client-response.ts';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { ApiError } from '@infer/shared';
import type { ChatUsage } from '@infer/shared';
import type { H1Controller, H1Handler, H1Head, H1Pool } from '../upstream/h1-pool.ts';
import type { ResolvedUpstream } from '../config/config-view.ts';
import type { RuntimeFailure } from '../metrics.ts';
import type { UpstreamTimeouts } from '../upstream/upstream-pools.ts';
import { firstByteLimitMs } from '../upstream/upstream-pools.ts';
import { readJsonAnswer } from './json-answer.ts';
import { binaryOf } from './binary.ts';
import { createSseRewriter } from './sse-rewriter.ts';
import type { SseOutput, SseRewriter } from './sse-rewriter.ts';
import { cutError, errorEventFor, idleTimeout, nodeStopping, streamErrorEvent, transportError } from './upstream-errors.ts';
import { adapterFor } from '../runtimes/runtime-registry.ts';

/** How one try against one replica ended. */
export type AttemptOutcome =
  /** The runtime answered >= 300 (body read, capped); nothing was sent to the client. */
  | { readonly kind: 'status'; readonly status: number; readonly text: string; readonly retryAfter: string | undefined }
  /** A complete JSON answer, ready to send (model rewritten). */
  | {
      readonly kind: 'json';
      readonly status: number;
      /** The body to send; `binary`: one character per byte (write it as latin1, its length is its size). */
      readonly body: string;
      readonly binary: boolean;
      readonly usage: ChatUsage | null;
      readonly completionEstimate: number;
    }
  /**
   * An SSE stream relayed to the client, all but its last bytes ([DONE], or an error event then [DONE]): `end`
   * sends them. The caller writes the usage record first, so a node killed between the two cannot have sent a
   * whole answer it never recorded.
   */
  | {
      readonly kind: 'streamed';
      readonly status: number;
      readonly usage: ChatUsage | null;
      readonly contentChunks: number;
      readonly failure: RuntimeFailure | null;
      readonly end: () => void;
    }
  /** No first byte within the first-byte timeout; nothing was sent to the client. */
  | { readonly kind: 'timeout' }
  /** Transport failure before anything reached the client; `answered` when response headers had come. */
  | { readonly kind: 'error'; readonly err: unknown; readonly answered: boolean; readonly apiError: ApiError | null }
  | { readonly kind: 'client_gone' };

export interface AttemptOptions {
  readonly pool: H1Pool;
  readonly upstream: ResolvedUpstream;
  /** The id the client sees (logs). */
  readonly requestId: string;
  /**
   * The runtime's `x-request-id`: unique per request. A caller's own `x-request-id` may repeat, even another tenant's
   * on a shared replica, and vLLM takes the header as its engine's request id, refusing (or worse) one already running.
   */
  readonly runtimeRequestId: string;
  readonly timeouts: UpstreamTimeouts;
  readonly stream: boolean;
  readonly wantsUsage: boolean;
  readonly clientModel: string;
  /** The client's response; headers set on it beforehand (request id, CORS, rate limits) go out with the stream's. */
  readonly res: ClientResponse;
  readonly onFirstByte: () => void;
  /**
   * The runtime request really ended (its response end, or the pool's error after a failure or an abort): called
   * once, possibly after `done` (a timeout or a client that left settles first, then the request is aborted).
   */
  readonly onEnd: () => void;
  readonly onStreamError?: ((err: unknown, requestId: string) => void) | undefined;
  /**
   * The error of a deployment stopped, failed or deleted meanwhile (null: it was not). A stream cut after bytes
   * reached the client ends with it instead of "the runtime closed the stream", and the cut does not count against
   * the replica (a failure before that is the caller's to judge: forward-chat asks the same question).
   */
  readonly halted?: (() => ApiError | null) | undefined;
}

export interface UpstreamAttempt {
  readonly done: Promise<AttemptOutcome>;
  /**
   * The client went away. A stream is aborted now (what was produced is known from the chunks relayed). A JSON
   * request keeps running to its end so that its usage (what the runtime produced) is billed; its answer is
   * read and never sent (as OpenAI bills a non-streaming request whose client left). Streaming from the runtime
   * and assembling the JSON in the node would also know what was produced, but measured 40 to 540 us of CPU per
   * request against 2 to 4 us for the relayed JSON (16 to 256 tokens): 10 to 200 times the cost.
   */
  clientLeft(): void;
  /** Stops the runtime request now, whatever its kind. */
  abort(): void;
  /**
   * The node is stopping and its drain time ran out: a stream ends now with an error event (what the client got is
   * billed), an answer not started settles as a `nodeStopping` error; the runtime request is aborted.
   */
  stop(): void;
}

const MAX_ERROR_BODY = 64 * 1024;
/**
 * Longest SSE line (one event) and longest JSON answer a runtime may send. A runtime is not always the platform's
 * (a tenant's external deployment): past these it is cut, rather than held in the shared node's memory without end.
 */
export const MAX_SSE_LINE_BYTES = 4 << 20;
export const MAX_JSON_ANSWER_BYTES = 64 << 20;

const tooLarge = (what: string): ApiError => new ApiError('upstream_error', `The model runtime sent ${what}: the answer is cut.`);
const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' } as const;
const noop = (): void => {};

/**
 * The client's socket, when a chunk of this response may be written to it directly: the response is chunked, holds
 * the socket (not queued behind a pipelined one) and has not ended; else null (`res.write` then). Node's `res.write`
 * sends a chunk as four pieces (size line, CRLF, bytes, CRLF), corks the socket and uncorks it on the next tick,
 * about 3 µs and five objects per chunk; `chunkOf` frames it in one buffer and the socket takes it in one write.
 * Everything else (the head, the end and its last chunk, the chunks of the error paths) still goes through `res`,
 * which writes to the same socket in order.
 */
function directSocket(res: ClientResponse): Socket | null {
  const socket = res.socket;
  if (socket === null || !res.chunkedEncoding || res.writableEnded || !socket.writable) return null;
  return socket;
}

/** `out` as one chunk of a chunked body: its size in hex, CRLF, its bytes, CRLF (from Node's buffer pool when small). */
function chunkOf(out: SseOutput): Buffer {
  const len = out.length; // a binary string holds one character per byte
  let digits = 1;
  while (len >= 16 ** digits) digits++;
  const chunk = Buffer.allocUnsafe(digits + len + 4);
  for (let i = digits - 1, v = len; i >= 0; i--, v = Math.floor(v / 16)) chunk[i] = HEX[v % 16]!;
  chunk[digits] = 13;
  chunk[digits + 1] = 10;
  if (typeof out === 'string') chunk.write(out, digits + 2, len, 'latin1');
  else out.copy(chunk, digits + 2, 0, len);
  chunk[digits + 2 + len] = 13;
  chunk[digits + 3 + len] = 10;
  return chunk;
}
const HEX = Buffer.from('0123456789abcdef', 'latin1');

/** One request to one replica through the chat pool's `dispatch` (h1-pool.ts: no stream objects, one handler object). */
class AttemptHandler implements H1Handler {
  readonly o: AttemptOptions;
  readonly resolve: (o: AttemptOutcome) => void;
  controller: H1Controller | null = null;
  settled = false;
  ended = false;
  aborted = false;
  status = 0;
  head: H1Head | null = null;
  mode: 'none' | 'error' | 'json' | 'sse' = 'none';
  chunks: Buffer[] = [];
  size = 0;
  gotFirstByte = false;
  sentToClient = false;
  rw: SseRewriter | null = null;
  firstByteTimer: NodeJS.Timeout | null;
  idleTimer: NodeJS.Timeout | null = null;
  /** When the last body bytes came (performance.now()): the idle timer is re-armed lazily from it, not per chunk. */
  lastDataAt = 0;
  onDrain: (() => void) | null = null;
  /**
   * When the runtime's connection was paused because the client stopped reading (performance.now()), else 0: the
   * runtime is not idle then, and its idle timer does not run against it (the client's stall has its own limit).
   */
  clientStalledAt = 0;
  /** Where `onDrain` listens: the client's socket when chunks are written to it directly (`directSocket`), else `res`. */
  drainFrom: Socket | ClientResponse | null = null;
  /** The response head went out with the first chunk written directly to the socket. */
  headOut = false;
  /** SSE output waiting for the end of the tick. */
  pending: SseOutput[] | null = null;

  constructor(o: AttemptOptions, resolve: (o: AttemptOutcome) => void) {
    this.o = o;
    this.resolve = resolve;
    this.firstByteTimer = setTimeout(this.onFirstByteTimeout, firstByteLimitMs(o.timeouts, o.stream));
  }

  settle(outcome: AttemptOutcome): void {
    if (this.settled) return;
    this.settled = true;
    if (this.firstByteTimer !== null) clearTimeout(this.firstByteTimer);
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    this.firstByteTimer = null;
    this.idleTimer = null;
    if (this.onDrain !== null) this.drainFrom?.off('drain', this.onDrain);
    this.resolve(outcome);
  }

  cancel(reason: Error): void {
    this.aborted = true;
    const c = this.controller;
    if (c !== null && !c.aborted) c.abort(reason);
  }

  readonly onFirstByteTimeout = (): void => {
    this.firstByteTimer = null;
    // Settle first: aborting can call onResponseError synchronously.
    this.settle({ kind: 'timeout' });
    this.cancel(new Error('first byte timeout'));
  };

  readonly armIdle = (): void => {
    if (!this.settled && this.idleTimer === null) this.idleTimer = setTimeout(this.onIdleTimeout, this.o.timeouts.idleMs);
  };

  readonly onIdleTimeout = (): void => {
    this.idleTimer = null;
    if (this.settled) return;
    const idleMs = this.o.timeouts.idleMs;
    if (this.clientStalledAt !== 0) {
      // Paused for a client that reads nothing: not the runtime's silence. A client that read nothing for the idle time
      // is the one cut (its 499, billed what was produced), with no failure counted against the replica.
      const stalledMs = performance.now() - this.clientStalledAt;
      if (stalledMs < idleMs) this.idleTimer = setTimeout(this.onIdleTimeout, Math.max(1, Math.ceil(idleMs - stalledMs)));
      else this.dropStalledClient();
      return;
    }
    // Bytes came since the timer was armed: wait out the rest of the idle time from the last of them. Cheaper than
    // refreshing the timer on every chunk (a relink in Node's timer lists per chunk), with the same deadline.
    const quietMs = performance.now() - this.lastDataAt;
    if (quietMs < idleMs) {
      this.idleTimer = setTimeout(this.onIdleTimeout, Math.max(1, Math.ceil(idleMs - quietMs)));
      return;
    }
    this.failAfterStart(idleTimeout(), 'idle_timeout', null);
    this.cancel(new Error('idle timeout'));
  };

  /** The client stopped reading for the idle time: its connection is closed (nothing more can reach it). */
  dropStalledClient(): void {
    const res = this.o.res;
    this.settleStream(CLIENT_CLOSED, null, () => void res.destroy());
    this.cancel(new Error('the client stopped reading'));
  }

  abortByClient(): void {
    if (this.mode === 'sse' && (this.sentToClient || this.pending !== null)) this.settleStream(CLIENT_CLOSED, null);
    else this.settle({ kind: 'client_gone' });
    this.cancel(new Error('client closed'));
  }

  stop(): void {
    if (this.settled) return;
    this.failAfterStart(nodeStopping(), null, null);
    this.cancel(new Error('node stopping'));
  }

  /** JSON requests run on (billed from the runtime's usage); streams stop now. */
  clientLeft(): void {
    if (!this.o.stream) return;
    this.abortByClient();
  }

  /** `end`: sends the stream's final bytes (the client gone: nothing to send). */
  settleStream(status: number, failure: RuntimeFailure | null, end: () => void = noop): void {
    const rw = this.rw!;
    this.settle({ kind: 'streamed', status, usage: rw.usage, contentChunks: rw.contentChunks, failure, end });
  }

  /** Ends the client's response with `last`, when called. */
  ender(last: SseOutput | undefined): () => void {
    const res = this.o.res;
    return () => {
      if (!res.writableEnded) res.end(last, 'latin1');
    };
  }

  /** Why the runtime's answer was cut: its deployment stopped (no replica failure), or the runtime's fault. */
  cut(): { readonly e: ApiError; readonly failure: RuntimeFailure | null } {
    const halted = this.o.halted?.() ?? null;
    return halted === null ? { e: cutError(), failure: 'cut' } : { e: halted, failure: null };
  }

  /**
   * A failure after the response started: an error event when the client has bytes, else an error outcome.
   * `failure` null: not the replica's fault (its deployment was stopped).
   */
  failAfterStart(e: ApiError, failure: RuntimeFailure | null, err: unknown): void {
    if (this.settled) return;
    if (this.mode === 'sse' && (this.sentToClient || this.pending !== null)) {
      const res = this.o.res;
      const tail = this.takePending(this.rw!.end());
      if (!this.sentToClient) this.startClientStream();
      if (tail !== null && !res.writableEnded) res.write(tail, 'latin1');
      this.settleStream(this.rw!.sawDone ? 200 : e.status, this.rw!.sawDone ? null : failure, this.ender(binaryOf(streamErrorEvent(e))));
      return;
    }
    this.settle({ kind: 'error', err, answered: this.status !== 0, apiError: e });
  }

  onRequestStart(controller: H1Controller): void {
    this.controller = controller;
    if (this.aborted) controller.abort(new Error('aborted'));
  }

  onResponseStart(_c: H1Controller, head: H1Head): void {
    if (this.settled) return;
    const statusCode = head.status;
    this.status = statusCode;
    this.head = head;
    if (statusCode >= 300) this.mode = 'error';
    else if (this.o.stream && (head.get('content-type') ?? '').startsWith('text/event-stream')) {
      this.mode = 'sse';
      const { upstream, clientModel, wantsUsage } = this.o;
      this.rw = createSseRewriter({
        from: upstream.servedModel,
        to: clientModel,
        dropUsageChunk: !wantsUsage,
        errorEvent: errorEventFor(adapterFor(upstream.kind)),
      });
    } else this.mode = 'json';
  }

  onResponseData(_c: H1Controller, chunk: Buffer): void {
    if (this.settled) return;
    this.lastDataAt = performance.now();
    if (!this.gotFirstByte) {
      this.gotFirstByte = true;
      if (this.firstByteTimer !== null) clearTimeout(this.firstByteTimer);
      this.firstByteTimer = null;
      // The idle timer is armed once this read is parsed: an answer that came whole in it (most JSON answers, short
      // streams) has settled by then and needs none (a timer made and cleared per request costs a microsecond).
      queueMicrotask(this.armIdle);
      this.o.onFirstByte();
    }

    if (this.mode === 'sse') {
      const rw = this.rw!;
      const out = rw.push(chunk);
      if (out === null) {
        if (rw.partialBytes > MAX_SSE_LINE_BYTES) {
          rw.dropPartial();
          this.failAfterStart(tooLarge(`an event over ${MAX_SSE_LINE_BYTES >> 20} MiB`), 'bad_answer', null);
          this.cancel(new Error('event too large'));
        }
        return;
      }
      // Chunks parsed from one socket read (often a whole short answer, with its end) leave in one
      // write at the end of this tick: no added latency, far fewer syscalls.
      if (this.pending === null) {
        this.pending = [out];
        queueMicrotask(this.flush);
      } else this.pending.push(out);
      return;
    }
    if (this.mode === 'error' && this.size >= MAX_ERROR_BODY) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > MAX_JSON_ANSWER_BYTES && this.mode !== 'error') {
      this.chunks = [];
      this.failAfterStart(tooLarge(`an answer over ${MAX_JSON_ANSWER_BYTES >> 20} MiB`), 'bad_answer', null);
      this.cancel(new Error('answer too large'));
    }
  }

  /** Undici is done with the request: the replica's slot frees. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.o.onEnd();
  }

  onResponseEnd(): void {
    this.end();
    if (this.settled) return;
    if (this.mode === 'sse') {
      const rw = this.rw!;
      const res = this.o.res;
      const tail = rw.end();
      if (rw.sawDone) {
        const out = this.takePending(tail);
        if (!this.sentToClient) this.startClientStream();
        this.settleStream(200, null, this.ender(out ?? undefined));
        return;
      }
      // The runtime closed cleanly but never said [DONE]: say plainly that the answer is cut.
      const cutTail = this.takePending(tail);
      if (!this.sentToClient && cutTail === null) {
        this.settle({ kind: 'error', err: null, answered: true, apiError: cutError() });
        return;
      }
      const cut = this.cut();
      if (!this.sentToClient) this.startClientStream();
      if (cutTail !== null) res.write(cutTail, 'latin1');
      this.settleStream(cut.e.status, cut.failure, this.ender(binaryOf(streamErrorEvent(cut.e))));
      return;
    }
    const buf = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    this.chunks = [];
    if (this.mode === 'error') {
      const text = buf.toString('utf8');
      this.settle({ kind: 'status', status: this.status, text: text.slice(0, MAX_ERROR_BODY), retryAfter: this.head?.get('retry-after') });
      return;
    }
    const answer = readJsonAnswer(buf, this.o.upstream.servedModel, this.o.clientModel);
    if (answer === null) {
      this.settle({ kind: 'error', err: null, answered: true, apiError: new ApiError('upstream_error', 'The model runtime sent an unreadable answer.') });
      return;
    }
    this.settle({
      kind: 'json',
      status: this.status,
      body: answer.body,
      binary: answer.binary,
      usage: answer.usage,
      completionEstimate: answer.completionEstimate,
    });
  }

  /** Takes the SSE output gathered this tick (plus `last`) as one binary string or buffer. */
  takePending(last: SseOutput | null): SseOutput | null {
    const p = this.pending;
    this.pending = null;
    if (p === null) return last;
    if (last !== null) p.push(last);
    if (p.length === 1) return p[0]!;
    return p.every((x) => typeof x === 'string') ? p.join('') : Buffer.concat(p.map((x) => (typeof x === 'string' ? Buffer.from(x, 'latin1') : x)));
  }

  readonly flush = (): void => {
    if (this.settled || this.pending === null) return;
    const out = this.takePending(null)!;
    if (!this.sentToClient) this.startClientStream();
    const res = this.o.res;
    const socket = directSocket(res);
    let more: boolean;
    if (socket === null) more = res.write(out, 'latin1');
    else {
      if (!this.headOut) {
        // The head leaves with the first chunk, in one write (a head already out, as after a cold-start hold, is not sent again).
        this.headOut = true;
        socket.cork();
        res.flushHeaders();
        more = socket.write(chunkOf(out));
        socket.uncork();
      } else more = socket.write(chunkOf(out));
    }
    if (!more) {
      if (this.clientStalledAt === 0) this.clientStalledAt = performance.now();
      this.controller?.pause();
      // Resumed by the next 'drain' of what was written to: the socket when written to directly, else `res`. A response
      // queued behind a pipelined one writes to `res` first and to the socket once it has it, so the listener moves.
      const from = socket ?? res;
      if (this.drainFrom !== from) {
        this.onDrain ??= this.onClientDrain;
        this.drainFrom?.off('drain', this.onDrain);
        from.on('drain', this.onDrain);
        this.drainFrom = from;
      }
    }
  };

  /** The client read what was written: the runtime's connection reads again, and its idle time counts from now. */
  readonly onClientDrain = (): void => {
    this.clientStalledAt = 0;
    this.lastDataAt = performance.now();
    this.controller?.resume();
  };

  startClientStream(): void {
    this.sentToClient = true;
    // A stream held through a cold start (src/scale) already has its headers out.
    if (!this.o.res.headersSent) this.o.res.writeHead(200, SSE_HEADERS);
  }

  onResponseError(_c: H1Controller, err: Error): void {
    this.end();
    if (this.settled) return;
    if (this.mode === 'sse' && (this.sentToClient || this.pending !== null)) this.o.onStreamError?.(err, this.o.requestId);
    if (this.status === 0) this.failAfterStart(transportError(err), 'cut', err);
    else {
      const cut = this.cut();
      this.failAfterStart(cut.e, cut.failure, err);
    }
  }
}

/**
 * Sends the chat request to one replica; the outcome says what happened and what reached the client. `payload` is the
 * request body (JSON text, or its UTF-8 bytes), apart from the options (which the attempt keeps for its whole life) so
 * that nothing holds it once the pool has written it.
 */
export function createUpstreamAttempt(o: AttemptOptions, payload: string | Buffer): UpstreamAttempt {
  let handler!: AttemptHandler;
  const done = new Promise<AttemptOutcome>((resolve) => {
    handler = new AttemptHandler(o, resolve);
  });
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': o.runtimeRequestId };
  if (o.upstream.authorization !== null) headers['authorization'] = o.upstream.authorization;
  o.pool.dispatch({ path: o.upstream.chatPath, method: 'POST', headers, body: payload }, handler);
  return { done, clientLeft: () => handler.clientLeft(), abort: () => handler.abortByClient(), stop: () => handler.stop() };
}
