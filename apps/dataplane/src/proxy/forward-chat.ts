import { performance } from 'node:perf_hooks';
import { ApiError } from '@infer/shared';
import type { ChatUsage } from '@infer/shared';
import type { FastifyReply } from 'fastify';
import type { Dispatcher } from 'undici';
import type { ResolvedKey, ResolvedUpstream, RouteTarget } from '../config/config-view.ts';
import type { DataplaneMetrics } from '../metrics.ts';
import { adapterFor } from '../runtimes/runtime-registry.ts';
import type { OriginState, UpstreamPools } from '../upstream/upstream-pools.ts';
import type { UsageSink } from '../usage/usage-reporter.ts';
import { createSseRewriter } from './sse-rewriter.ts';
import { isConnectError, runtimeError, streamErrorEvent, transportError } from './upstream-errors.ts';

/** One authenticated, validated chat request on its way to a runtime. */
export interface ChatCall {
  readonly requestId: string;
  readonly startedAt: number;
  readonly startPerf: number;
  readonly key: ResolvedKey;
  readonly target: RouteTarget;
  readonly mode: 'shared' | 'dedicated';
  /** The name written back into responses: what the client sent, or the catalog Name. */
  readonly clientModel: string;
  /** The coerced request body; `model` and `stream_options` are overwritten here. */
  readonly body: Record<string, unknown>;
}

export interface ForwardDeps {
  readonly pools: UpstreamPools;
  readonly usage: UsageSink;
  readonly metrics: DataplaneMetrics;
  readonly onStreamError?: (err: unknown) => void;
}

/** Status recorded when the client went away before the answer was complete. */
const CLIENT_CLOSED = 499;
const MAX_ERROR_BODY = 64 * 1024;

function estimatePrompt(body: Record<string, unknown>): number {
  let chars = 0;
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    for (const m of messages) {
      const c = (m as { content?: unknown }).content;
      chars += typeof c === 'string' ? c.length : c == null ? 0 : JSON.stringify(c).length;
    }
  }
  return Math.ceil(chars / 4);
}

function estimateCompletion(obj: Record<string, unknown>): number {
  let chars = 0;
  const choices = obj['choices'];
  if (Array.isArray(choices)) {
    for (const ch of choices) {
      const c = (ch as { message?: { content?: unknown } }).message?.content;
      if (typeof c === 'string') chars += c.length;
    }
  }
  return Math.ceil(chars / 4);
}

function readUsage(u: unknown): ChatUsage | null {
  if (typeof u !== 'object' || u === null) return null;
  const r = u as Record<string, unknown>;
  const p = r['prompt_tokens'];
  const c = r['completion_tokens'];
  return typeof p === 'number' && typeof c === 'number' ? { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } : null;
}

const header = (h: Dispatcher.ResponseData['headers'], name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
  let out = '';
  for await (const chunk of body) {
    if (out.length < MAX_ERROR_BODY) out += (chunk as Buffer).toString('utf8');
  }
  return out;
}

/** Forwards a chat request to the least-loaded replica and relays the answer (JSON, or SSE chunk by chunk). */
export async function forwardChat(deps: ForwardDeps, call: ChatCall, reply: FastifyReply): Promise<void> {
  const { body, target } = call;
  const stream = body['stream'] === true;
  const clientOptions = body['stream_options'] as Record<string, unknown> | null | undefined;
  const wantsUsage = stream && clientOptions?.['include_usage'] === true;
  if (stream) body['stream_options'] = { ...clientOptions, include_usage: true }; // always meter streams

  let ttftMs: number | null = null;
  const record = (status: number, usage: ChatUsage | null, completionEstimate: number): void => {
    deps.usage.record({
      requestId: call.requestId,
      tenantId: call.key.tenantId,
      keyId: call.key.id,
      endpointId: target.endpointId,
      deploymentId: target.deploymentId,
      mode: call.mode,
      model: target.name,
      promptTokens: usage?.prompt_tokens ?? (status < 400 || completionEstimate > 0 ? estimatePrompt(body) : 0),
      completionTokens: usage?.completion_tokens ?? completionEstimate,
      estimated: usage === null,
      status,
      ttftMs,
      latencyMs: performance.now() - call.startPerf,
      startedAt: new Date(call.startedAt).toISOString(),
    });
  };

  const res = reply.raw;
  const abort = new AbortController();
  let clientGone = false;
  const onClose = (): void => {
    if (!res.writableFinished) {
      clientGone = true;
      abort.abort();
    }
  };
  res.on('close', onClose);

  // Pick a replica; on a connect failure (nothing was sent) try the next one.
  let tried: Set<string> | null = null;
  let upstream: ResolvedUpstream | null;
  let state: OriginState;
  let response: Dispatcher.ResponseData;
  for (;;) {
    upstream = deps.pools.pick(target.upstreams, tried);
    if (upstream === null) {
      res.off('close', onClose);
      const e = new ApiError('no_healthy_upstream', 'No replica of this model could be reached. Try again shortly.');
      record(e.status, null, 0);
      throw e;
    }
    body['model'] = upstream.servedModel;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': call.requestId };
    if (upstream.authorization !== null) headers['authorization'] = upstream.authorization;
    state = deps.pools.get(upstream.origin);
    state.inFlight++;
    try {
      response = await state.pool.request({ path: upstream.chatPath, method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal });
      break;
    } catch (err) {
      state.inFlight--;
      if (clientGone) {
        record(CLIENT_CLOSED, null, 0);
        return;
      }
      if (isConnectError(err) && target.upstreams.length > 1) {
        (tried ??= new Set()).add(upstream.origin);
        continue;
      }
      res.off('close', onClose);
      const e = transportError(err);
      record(e.status, null, 0);
      throw e;
    }
  }
  ttftMs = performance.now() - call.startPerf;
  const served = upstream.servedModel;
  const adapter = adapterFor(upstream.kind);
  const { statusCode } = response;
  const contentType = header(response.headers, 'content-type') ?? '';

  if (statusCode >= 300) {
    let text = '';
    try {
      text = await readCapped(response.body);
    } catch {
      // the status says enough
    } finally {
      state.inFlight--;
      res.off('close', onClose);
    }
    const e = runtimeError(adapter, statusCode, text, served, call.clientModel, header(response.headers, 'retry-after'));
    record(clientGone ? CLIENT_CLOSED : e.status, null, 0);
    throw e;
  }

  if (stream && contentType.startsWith('text/event-stream')) {
    await relayStream(deps, call, reply, response, served, wantsUsage, state, record, () => clientGone);
    res.off('close', onClose);
    return;
  }

  // JSON: parse, rewrite `model`, read `usage`, serialise.
  let text: string;
  try {
    text = await response.body.text();
  } catch (err) {
    state.inFlight--;
    res.off('close', onClose);
    if (clientGone) {
      record(CLIENT_CLOSED, null, 0);
      return;
    }
    const e = transportError(err);
    record(e.status, null, 0);
    throw e;
  }
  state.inFlight--;
  res.off('close', onClose);
  let obj: Record<string, unknown>;
  try {
    obj = JSON.parse(text) as Record<string, unknown>;
  } catch {
    const e = new ApiError('upstream_error', 'The model runtime sent an unreadable answer.');
    record(e.status, null, 0);
    throw e;
  }
  const usage = readUsage(obj['usage']);
  let out = text;
  if (served !== call.clientModel && typeof obj['model'] === 'string') {
    obj['model'] = call.clientModel;
    out = JSON.stringify(obj);
  }
  record(statusCode, usage, usage === null ? estimateCompletion(obj) : 0);
  reply.code(statusCode).header('content-type', 'application/json').send(out);
}

function relayStream(
  deps: ForwardDeps,
  call: ChatCall,
  reply: FastifyReply,
  response: Dispatcher.ResponseData,
  served: string,
  wantsUsage: boolean,
  state: OriginState,
  record: (status: number, usage: ChatUsage | null, completionEstimate: number) => void,
  clientGone: () => boolean,
): Promise<void> {
  const res = reply.raw;
  reply.hijack();
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
    'x-request-id': call.requestId,
  });
  const rw = createSseRewriter({ from: served, to: call.clientModel, dropUsageChunk: !wantsUsage });
  const upstreamBody = response.body;

  return new Promise<void>((resolve) => {
    let settled = false;
    const finish = (status: number): void => {
      if (settled) return;
      settled = true;
      state.inFlight--;
      res.off('drain', onDrain);
      // Roughly one token per event, minus the role, usage and [DONE] events.
      const estimate = rw.usage === null ? Math.max(0, rw.events - 2) : 0;
      record(status, rw.usage, estimate);
      deps.metrics.countRequest('chat', call.mode, status);
      resolve();
    };
    const onDrain = (): void => {
      upstreamBody.resume();
    };
    res.on('drain', onDrain);
    upstreamBody.on('data', (chunk: Buffer) => {
      const out = rw.push(chunk);
      if (out !== null && !res.write(out)) upstreamBody.pause();
    });
    upstreamBody.on('end', () => {
      const tail = rw.end();
      if (tail !== null) res.write(tail);
      if (rw.sawDone) {
        res.end();
        finish(200);
        return;
      }
      // The runtime closed cleanly but never said [DONE]: say plainly that the answer is cut.
      res.end(streamErrorEvent(null));
      finish(502);
    });
    upstreamBody.on('error', (err: Error) => {
      if (clientGone()) {
        res.destroy();
        finish(CLIENT_CLOSED);
        return;
      }
      deps.onStreamError?.(err);
      if (!res.writableEnded) res.end(streamErrorEvent(err));
      finish(rw.sawDone ? 200 : transportError(err).status);
    });
    res.on('close', () => {
      if (!res.writableFinished) {
        upstreamBody.destroy();
        finish(CLIENT_CLOSED);
      }
    });
  });
}
