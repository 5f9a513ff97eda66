import { CLIENT_CLOSED } from '../client-gone.ts';
import { performance } from 'node:perf_hooks';
import { ApiError } from '@infer/shared';
import type { ChatUsage } from '@infer/shared';
import type { ClientResponse } from '../front/client-response.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { ResolvedKey, ResolvedUpstream, RouteTarget } from '../config/config-view.ts';
import type { DataplaneMetrics, RuntimeFailure } from '../metrics.ts';
import { countPromptTokens } from '../usage/prompt-tokens.ts';
import { logRequest } from '../logging.ts';
import { adapterFor } from '../runtimes/runtime-registry.ts';
import type { OriginState, UpstreamPools, UpstreamTimeouts } from '../upstream/upstream-pools.ts';
import { firstByteLimitMs } from '../upstream/upstream-pools.ts';
import type { Router } from '../routing/router.ts';
import type { RoutingMetrics } from '../routing/routing-metrics.ts';
import { afterDurable, type UsageSink } from '../usage/usage-reporter.ts';
import { isoTime } from '../usage/iso-time.ts';
import type { ChatBody } from './chat-body.ts';
import { rawPayload } from './raw-payload.ts';
import { createUpstreamAttempt } from './upstream-attempt.ts';
import type { AttemptOutcome } from './upstream-attempt.ts';
import { firstByteTimeout, isConnectError, isResetBeforeAnswer, nodeStopping, runtimeError, transportError } from './upstream-errors.ts';

/** One authenticated, validated chat request on its way to a runtime. */
export interface ChatCall {
  readonly requestId: string;
  /** The usage record's id (unique per request; the ingest is idempotent on it). */
  readonly usageId: string;
  readonly startedAt: number;
  readonly startPerf: number;
  readonly key: ResolvedKey;
  readonly target: RouteTarget;
  readonly mode: 'shared' | 'dedicated';
  /** The name written back into responses: what the client sent, or the catalog Name. */
  readonly clientModel: string;
  /** The request body (the parsed form is dropped once the runtime has it, where its bytes can stand for it). */
  readonly input: ChatBody;
  /**
   * Its concurrency-gate slot: ended once the call returned and every runtime request it made has really ended
   * (a timed-out attempt may end later), so the gate never admits more than the replicas are running.
   */
  readonly admission?: { end(): void };
}

export interface ForwardDeps {
  readonly pools: UpstreamPools;
  /** Picks replicas by the target's routing policy (src/routing); absent: least in flight. */
  readonly router?: Router;
  /** Requests one replica of a target takes at once (src/limits); a full replica is never picked. Absent: no cap. */
  readonly replicaCap?: (target: RouteTarget) => number;
  readonly routingMetrics?: RoutingMetrics;
  readonly usage: UsageSink;
  readonly metrics: DataplaneMetrics;
  readonly timeouts: UpstreamTimeouts;
  /** Retries on another replica (connect failures, 502/503 before the first byte); default 2. */
  readonly maxRetries?: number;
  /** A stream failed after bytes reached the client (logged with the request's id). */
  readonly onStreamError?: (err: unknown, requestId: string) => void;
  /**
   * Why a dedicated target's runtime may have cut an answer: the deployment was stopped (or failed) meanwhile
   * (src/scale); null when it was not.
   */
  readonly halted?: (target: RouteTarget) => ApiError | null;
  /** Write one info line per request (LOG_LEVEL=info). */
  readonly logInfo?: boolean;
  /** The calls in flight, for the node's stop (`InFlightCalls`). */
  readonly live?: InFlightCalls;
}

/**
 * The node's chat calls in flight. When its drain time runs out, `stopping` is set and each entry stops its call
 * (`UpstreamAttempt.stop`); a call that reaches `forwardChat` later (it waited for admission) stops at once. Every
 * call so ends with its usage record before the process exits.
 */
export interface InFlightCalls {
  stopping: boolean;
  readonly calls: Set<() => void>;
}

/** Why an attempt counts against the replica's health, or null when the runtime did its job. */
function failureOf(o: AttemptOutcome): RuntimeFailure | null {
  switch (o.kind) {
    case 'error':
      return isConnectError(o.err) ? 'connect' : 'cut';
    case 'status':
      return o.status === 503 ? 'status_503' : o.status >= 500 ? 'status_5xx' : null;
    case 'timeout':
      return 'first_byte_timeout';
    case 'streamed':
      return o.failure;
    case 'json':
      return o.status >= 500 ? 'status_5xx' : null;
    default:
      return null;
  }
}

/** True when the attempt failed with nothing sent to the client: no answer, a 5xx, a timeout. */
function failedBeforeAnswer(o: AttemptOutcome): boolean {
  return o.kind === 'error' || o.kind === 'timeout' || (o.kind === 'status' && o.status >= 500);
}

/** True when the runtime may have taken the prompt (it was not refused, nor left unreached). */
function reachedRuntime(o: AttemptOutcome): boolean {
  if (o.kind === 'error') return !isConnectError(o.err);
  return o.kind !== 'status';
}

/**
 * True when another replica may take the request: nothing reached the client, and the runtime was not reached,
 * refused it, or failed it with a 5xx (a replica answering every request with 500 costs its clients nothing
 * while outlier detection takes it out). Timeouts are not retried: they already cost the client their length.
 */
function retryable(o: AttemptOutcome): boolean {
  if (o.kind === 'error') return isConnectError(o.err) || (!o.answered && isResetBeforeAnswer(o.err));
  return o.kind === 'status' && o.status >= 500;
}

/**
 * Forwards a chat request to the least-loaded healthy replica and relays the answer (JSON, or SSE chunk by
 * chunk). Connect failures and 502/503 answers are retried on another replica while nothing was sent to the
 * client; timeouts end as a 504 before the first byte or as an error event after it. Exactly one usage
 * record is written per call, and the request is counted in the metrics here, with its real outcome; an
 * ApiError it throws is for the caller to send (already counted).
 */
export async function forwardChat(deps: ForwardDeps, call: ChatCall, res: ClientResponse, log: FastifyBaseLogger): Promise<void> {
  const { input, target } = call;
  const { metrics } = deps;
  // (No local holds the parsed body: a suspended async function keeps its locals, and it may be released below.)
  const stream = input.value['stream'] === true;
  const sentModel = input.value['model'];
  const clientOptions = input.value['stream_options'] as Record<string, unknown> | null | undefined;
  const wantsUsage = stream && clientOptions?.['include_usage'] === true;
  /** The replica's served name, once one was picked. */
  let served: string | null = null;
  /** The body as the runtime gets it: the served model, and usage always on for a stream (streams are always metered). */
  const prepared = (): Record<string, unknown> => {
    const b = input.value;
    if (served !== null) b['model'] = served;
    if (stream) b['stream_options'] = { ...clientOptions, include_usage: true };
    return b;
  };

  let ttftMs: number | null = null;
  let recorded = false;
  /**
   * Writes the one usage record. Without the runtime's `usage`, the prompt is counted with the model family's tokenizer
   * when the runtime worked on it: a success, anything produced, or `prefilled` (the client left while the
   * runtime had the request); a refusal or an unreachable runtime bills no prompt.
   */
  const record = (status: number, usage: ChatUsage | null, completionEstimate: number, prefilled = false): void => {
    recorded = true;
    const promptTokens = usage?.prompt_tokens ?? (status < 400 || completionEstimate > 0 || prefilled ? countPromptTokens(prepared()) : 0);
    const completionTokens = usage?.completion_tokens ?? completionEstimate;
    const latencyMs = performance.now() - call.startPerf;
    deps.usage.record({
      requestId: call.usageId,
      tenantId: call.key.tenantId,
      keyId: call.key.id,
      endpointId: target.endpointId,
      deploymentId: target.deploymentId,
      mode: call.mode,
      model: target.name,
      promptTokens,
      completionTokens,
      estimated: usage === null,
      status,
      ttftMs,
      latencyMs,
      startedAt: isoTime(call.startedAt),
    });
    metrics.observeChat(call.mode, target.name, ttftMs, latencyMs, promptTokens, completionTokens);
    // Counted here with the real outcome (a stream that failed after its 200 header, a client that left).
    metrics.countRequest('chat', call.mode, status, target.name);
    if (deps.logInfo === true) logRequest(log, call.requestId, 'chat', call.mode, target.name, status, latencyMs, { promptTokens, completionTokens, ttftMs });
  };
  /**
   * The record is in the spool before the stream's last bytes go (see AttemptOutcome 'streamed'). A first byte relayed
   * proves the runtime read the prompt: it is billed even when the stream was cut before any text.
   */
  const recordThenEnd = (o: Extract<AttemptOutcome, { kind: 'streamed' }>, status: number): void => {
    try {
      record(status, o.usage, o.usage === null ? o.contentChunks : 0, ttftMs !== null);
    } catch (err) {
      o.end();
      throw err;
    }
    afterDurable(deps.usage, o.end);
  };
  metrics.inFlightInc();
  let current: { clientLeft(): void; stop(): void } | null = null;
  let clientGone = false;
  const onClose = (): void => {
    if (!res.writableFinished) {
      clientGone = true;
      current?.clientLeft();
    }
  };
  res.on('close', onClose);

  let stopped = deps.live?.stopping === true;
  const stop = (): void => {
    stopped = true;
    current?.stop();
  };
  deps.live?.calls.add(stop);

  const maxAttempts = 1 + (deps.maxRetries ?? 2);
  let tried: Set<string> | null = null;
  let lastError: ApiError | null = null;
  const cap = deps.replicaCap?.(target) ?? Number.POSITIVE_INFINITY;
  // The call itself plus its runtime requests not yet ended: the gate slot frees when all are over.
  let open = 1;
  const closeOne = (): void => {
    if (--open === 0) call.admission?.end();
  };
  try {
    // Every replica saturated (queue or KV cache over the threshold): wait briefly for room, else shed.
    const hold = deps.router?.hold(target, res) ?? null;
    if (hold !== null) {
      const outcome = await hold;
      if (outcome === 'gone' || clientGone) {
        record(CLIENT_CLOSED, null, 0);
        return;
      }
      if (outcome === 'shed') {
        const e = new ApiError(
          'concurrency_limit_exceeded',
          'Every replica of this model is saturated (requests waiting or KV cache full). Retry shortly.',
          null,
          { 'retry-after': '1' },
        );
        record(e.status, null, 0);
        throw e;
      }
    }
    // The error of the target's deployment stopped, failed or deleted by now (dedicated targets only).
    const haltedNow = target.deploymentId === null || deps.halted === undefined ? undefined : () => deps.halted!(target);
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      if (stopped) throw stoppedError(record);
      const picked = deps.router !== undefined ? deps.router.pick(target, tried, input.value, log, call.requestId, cap) : null;
      const upstream: ResolvedUpstream | null = deps.router !== undefined ? (picked?.upstream ?? null) : deps.pools.pick(target.upstreams, tried, cap);
      if (upstream === null) {
        // Every replica left untried is full (a retry, a replica that left or was ejected while its requests
        // run): wait for a slot rather than overfill one. The gate keeps this rare.
        if (!hasUntried(target, tried) || performance.now() - call.startPerf > firstByteLimitMs(deps.timeouts, stream)) break;
        if (!(await deps.pools.waitForSlot(res, SLOT_WAIT_MS)) || clientGone) {
          record(CLIENT_CLOSED, null, 0);
          return;
        }
        attempt--;
        continue;
      }
      const state: OriginState = deps.pools.get(upstream.origin);
      served = upstream.servedModel;
      const spliced = input.bytes !== undefined ? rawPayload(input.bytes, sentModel, served, stream) : null;
      // One request per connection (no pipelining): beyond the pool's cap it waits for a socket.
      if (++state.inFlight > state.connections) deps.routingMetrics?.connectionWait(upstream.id);
      open++;
      // The prompt the replica still has to prefill, until its first byte (the scorer's view of its queue).
      let prefilling = picked?.prefillBlocks ?? 0;
      state.pendingPrefillBlocks += prefilling;
      const prefilled = (): void => {
        state.pendingPrefillBlocks -= prefilling;
        prefilling = 0;
      };
      let outcome: AttemptOutcome;
      try {
        const run = createUpstreamAttempt(
          {
            pool: state.chat,
            upstream,
            requestId: call.requestId,
            runtimeRequestId: call.usageId,
            timeouts: deps.timeouts,
            stream,
            wantsUsage,
            clientModel: call.clientModel,
            res,
            onFirstByte: () => {
              ttftMs = performance.now() - call.startPerf;
              prefilled();
            },
            // The replica's slot frees when the runtime request really ended, not when this attempt settled.
            onEnd: () => {
              deps.pools.ended(state);
              closeOne();
            },
            onStreamError: deps.onStreamError,
            halted: haltedNow,
          },
          spliced ?? JSON.stringify(prepared()),
        );
        current = run;
        // The runtime has the request (the chat pool holds its bytes): the parsed body need not wait with it.
        if (spliced !== null) input.release();
        if (clientGone) run.abort();
        outcome = await run.done;
      } finally {
        current = null;
        prefilled();
      }

      // A failure (no answer, a 5xx, a timeout) of a deployment stopped or failed meanwhile is the stop's, not the
      // replica's: the caller gets deployment_stopped (x-should-retry: false), not a retryable 502, and no other
      // replica is tried.
      const halted = haltedNow !== undefined && !clientGone && failedBeforeAnswer(outcome) ? haltedNow() : null;
      if (halted !== null) {
        record(halted.status, null, 0, reachedRuntime(outcome));
        throw halted;
      }
      // Stopped by the node with no answer under way: not the replica's failure, and no retry on this node.
      if (stopped && outcome.kind !== 'streamed' && outcome.kind !== 'json' && !clientGone) throw stoppedError(record);
      const failure = failureOf(outcome);
      if (failure === null) deps.pools.succeeded(state);
      else {
        deps.pools.failed(state, upstream, target.upstreams);
        metrics.runtimeError(failure);
      }

      if (outcome.kind === 'client_gone' || clientGone) {
        // Streams bill what was produced; a JSON request runs to its end after the client left and bills the
        // runtime's usage; otherwise (a timeout, a failure) the runtime had (and prefilled) the prompt, but nothing
        // produced is known: completion 0.
        if (outcome.kind === 'streamed') recordThenEnd(outcome, CLIENT_CLOSED);
        else if (outcome.kind === 'json') record(CLIENT_CLOSED, outcome.usage, outcome.completionEstimate, true);
        else record(CLIENT_CLOSED, null, 0, reachedRuntime(outcome));
        return;
      }
      if (retryable(outcome) && attempt + 1 < maxAttempts) {
        (tried ??= new Set()).add(upstream.origin);
        lastError = finalError(outcome, upstream, call.clientModel);
        // Counted only when there is another replica to retry on (the next pass ends the loop otherwise).
        if (hasUntried(target, tried)) metrics.retry(failure ?? 'connect');
        continue;
      }
      switch (outcome.kind) {
        case 'streamed':
          recordThenEnd(outcome, outcome.status);
          return;
        case 'json':
          record(outcome.status, outcome.usage, outcome.completionEstimate);
          // As for a stream: the answer goes once its record is in the spool.
          afterDurable(deps.usage, () => {
            const size = outcome.binary ? outcome.body.length : Buffer.byteLength(outcome.body);
            res.writeHead(outcome.status, { 'content-type': 'application/json', 'content-length': size });
            res.end(outcome.body, outcome.binary ? 'latin1' : 'utf8');
          });
          return;
        default: {
          const e = finalError(outcome, upstream, call.clientModel);
          record(e.status, null, 0);
          throw e;
        }
      }
    }
    // Every replica was tried (or none was left to try).
    const e =
      lastError !== null && lastError.code !== 'no_healthy_upstream'
        ? lastError
        : new ApiError('no_healthy_upstream', 'No replica of this model could be reached. Try again shortly.');
    record(e.status, null, 0);
    throw e;
  } finally {
    deps.live?.calls.delete(stop);
    res.off('close', onClose);
    // Whatever threw, the gauge comes back down and the request is counted (and billed as a failure) once.
    metrics.inFlightDec();
    if (!recorded) record(500, null, 0);
    closeOne();
  }
}

/** The node stopped the call before an answer was under way: a 503 to retry elsewhere, billed nothing. */
function stoppedError(record: (status: number, usage: ChatUsage | null, completionEstimate: number) => void): ApiError {
  const e = nodeStopping();
  record(e.status, null, 0);
  return e;
}

/** Longest single wait for a replica slot before looking again, ms. */
const SLOT_WAIT_MS = 1000;

function hasUntried(target: RouteTarget, tried: ReadonlySet<string> | null): boolean {
  if (tried === null) return target.upstreams.length > 0;
  for (const u of target.upstreams) if (!tried.has(u.origin)) return true;
  return false;
}

function finalError(o: AttemptOutcome, upstream: ResolvedUpstream, clientModel: string): ApiError {
  switch (o.kind) {
    case 'status':
      return runtimeError(adapterFor(upstream.kind), o.status, o.text, upstream.servedModel, clientModel, o.retryAfter);
    case 'timeout':
      return firstByteTimeout();
    case 'error':
      return o.apiError ?? transportError(o.err);
    default:
      return new ApiError('upstream_error', 'The model runtime failed to answer.');
  }
}
