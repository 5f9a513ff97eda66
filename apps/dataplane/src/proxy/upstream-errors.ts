import { ApiError } from '@infer/shared';
import type { RuntimeAdapter } from '../runtimes/runtime-adapter.ts';

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

const errCode = (err: unknown): string | undefined =>
  typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string' ? (err as { code: string }).code : undefined;

/** True when the request never reached the runtime, so another replica may take it. */
export const isConnectError = (err: unknown): boolean => CONNECT_CODES.has(errCode(err) ?? '');

/** Maps a transport failure before the response started to the caller's error. */
export function transportError(err: unknown): ApiError {
  const code = errCode(err);
  // The address guard refused a tenant-given runtime address: nothing was sent, nothing internal is relayed.
  if (code === 'ADDRESS_REFUSED') {
    return new ApiError('upstream_error', "The deployment's runtime address is not allowed: it does not resolve to a public address.");
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new ApiError('upstream_timeout', 'The model runtime did not answer in time.');
  }
  if (code !== undefined && CONNECT_CODES.has(code)) {
    return new ApiError('no_healthy_upstream', 'No replica of this model could be reached. Try again shortly.');
  }
  return new ApiError('upstream_error', 'The model runtime failed to answer.');
}

/** Failures where the request may not have reached the runtime at all (a reset before any answer). */
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/** True when the connection broke before any answer came back (safe to retry elsewhere). */
export const isResetBeforeAnswer = (err: unknown): boolean => RESET_CODES.has(errCode(err) ?? '');

export const firstByteTimeout = (): ApiError => new ApiError('upstream_timeout', 'The model runtime did not start answering in time.');
export const idleTimeout = (): ApiError => new ApiError('upstream_timeout', 'The model runtime stopped sending tokens (idle timeout).');
export const cutError = (): ApiError => new ApiError('upstream_error', 'The model runtime closed the stream before it was complete.');
/** The node stopped before the answer was complete (its drain time ran out); another node serves a retry. */
export const nodeStopping = (): ApiError =>
  new ApiError('service_unavailable', 'This server is shutting down and stopped the answer before it was complete. Retry the request.', null, {
    'retry-after': '1',
  });

/** The error event ending a stream that failed after its first byte. */
export function streamErrorEvent(err: unknown): string {
  const e = err instanceof ApiError ? err : err === null ? cutError() : transportError(err);
  return `data: ${JSON.stringify(e.toBody())}\n\ndata: [DONE]\n\n`;
}

/** A runtime's `param` is passed on when it names a request field (`n`, `messages[0].content`), nothing else. */
const FIELD_PATH = /^[A-Za-z_][\w.[\]]{0,99}$/;

interface RuntimeErrorBody {
  readonly message: string;
  readonly code: string | null;
  readonly param: string | null;
}

function readError(text: string): RuntimeErrorBody {
  try {
    const obj = JSON.parse(text) as Record<string, unknown>;
    const inner = obj['error'];
    const fields = (e: Record<string, unknown>): RuntimeErrorBody => ({
      message: typeof e['message'] === 'string' ? e['message'] : '',
      code: typeof e['code'] === 'string' ? e['code'] : null,
      param: typeof e['param'] === 'string' && FIELD_PATH.test(e['param']) ? e['param'] : null,
    });
    if (typeof inner === 'object' && inner !== null) return fields(inner as Record<string, unknown>);
    // TGI: {"error": "...", "error_type": "..."}; vLLM (older): {"object":"error","message":...}.
    if (typeof inner === 'string') return { message: inner, code: null, param: null };
    if (typeof obj['message'] === 'string') return fields(obj);
  } catch {
    // not JSON: fall through
  }
  return { message: '', code: null, param: null };
}

/**
 * Maps a runtime's error answer: the caller's faults (context length, bad parameters, too large, rate)
 * keep their 4xx with the runtime's message; everything else is the runtime's fault and becomes a generic 502.
 */
export function runtimeError(
  adapter: RuntimeAdapter,
  status: number,
  text: string,
  served: string,
  clientModel: string,
  retryAfter: string | undefined,
): ApiError {
  if (status >= 400 && status < 500) {
    const { message: raw, code, param } = readError(text);
    const message = (raw || `The model runtime rejected the request (HTTP ${status}).`).replaceAll(served, clientModel).slice(0, 2000);
    if (adapter.isContextLengthError(status, message, code)) return new ApiError('context_length_exceeded', message, 'messages');
    if (status === 400 || status === 422) return new ApiError('invalid_request', message, param);
    if (status === 413) return new ApiError('request_too_large', message, param);
    if (status === 429) return new ApiError('rate_limit_exceeded', message, null, retryAfter ? { 'retry-after': retryAfter } : {});
  }
  if (status === 503) {
    return new ApiError(
      'no_healthy_upstream',
      'The model runtime is overloaded or not ready. Try again shortly.',
      null,
      retryAfter ? { 'retry-after': retryAfter } : {},
    );
  }
  return new ApiError('upstream_error', 'The model runtime failed to answer.');
}

/** TGI's in-stream `error_type` to the HTTP status TGI answers the same error with before a stream starts. */
const TGI_ERROR_STATUS: Readonly<Record<string, number>> = { validation: 422, template_error: 422, overloaded: 429 };

const errorEvents = new Map<RuntimeAdapter, (json: string, served: string, clientModel: string) => string>();

/**
 * The client's form of an error event a runtime sent inside a stream (vLLM: `{"error": {..., "code": 400}}`, TGI:
 * `{"error": "...", "error_type": ...}`): the OpenAI body `runtimeError` gives its answer of the same status (a
 * numeric `code` is the status; TGI's `error_type` maps as TGI's own HTTP answers do; none: 500), so a stream's error reads as a non-streamed one would.
 */
export function errorEventFor(adapter: RuntimeAdapter): (json: string, served: string, clientModel: string) => string {
  let f = errorEvents.get(adapter);
  if (f === undefined) {
    f = (json, served, clientModel) => {
      let status = 500;
      try {
        const obj = JSON.parse(json) as Record<string, unknown>;
        const inner = obj['error'];
        const code = typeof inner === 'object' && inner !== null ? (inner as Record<string, unknown>)['code'] : undefined;
        if (typeof code === 'number' && Number.isInteger(code) && code >= 400 && code <= 599) status = code;
        else if (typeof inner === 'string') status = TGI_ERROR_STATUS[String(obj['error_type'])] ?? 500;
      } catch {
        // the caller parsed it already
      }
      return JSON.stringify(runtimeError(adapter, status, json, served, clientModel, undefined).toBody());
    };
    errorEvents.set(adapter, f);
  }
  return f;
}
