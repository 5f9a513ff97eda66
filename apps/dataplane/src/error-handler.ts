import { STATUS_CODES } from 'node:http';
import type { ClientResponse } from './front/client-response.ts';
import { lingerOnClose } from './front/lingering-close.ts';
import type { Duplex } from 'node:stream';
import { ApiError, ERRORS, errorBody } from '@infer/shared';
import type { ErrorCode, OpenAIErrorBody } from '@infer/shared';
import type { FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { streamErrorEvent } from './proxy/upstream-errors.ts';

const FASTIFY_CODES: Readonly<Record<string, readonly [ErrorCode, string]>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['unsupported_media_type', "Unsupported Content-Type: send the body as 'application/json'."],
  FST_ERR_CTP_BODY_TOO_LARGE: ['request_too_large', 'The request body is too large.'],
  FST_ERR_CTP_INVALID_JSON_BODY: ['invalid_json', 'The request body is not valid JSON.'],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['invalid_json', 'The request body is empty; send a JSON object.'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['invalid_request', 'The Content-Length header does not match the body.'],
  FST_ERR_BAD_URL: ['invalid_request', 'The request URL is not valid (bad percent-encoding).'],
  FST_ERR_MAX_PARAM_LENGTH: ['not_found', 'Not found: a path segment of the URL is too long.'],
};

const BY_STATUS: Readonly<Record<number, readonly [ErrorCode, string]>> = {
  404: ['not_found', 'Not found.'],
  405: ['method_not_allowed', 'Method not allowed.'],
  413: ['request_too_large', 'The request body is too large.'],
  415: ['unsupported_media_type', "Unsupported Content-Type: send the body as 'application/json'."],
};

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** The answer to an error: status, extra headers, OpenAI body; `internal` when it must be logged. */
export interface ErrorReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: OpenAIErrorBody;
  readonly internal: boolean;
}

/** Maps any error to an OpenAI-shaped answer; 5xx messages are generic. */
export function errorReply(err: FastifyError | ApiError | Error): ErrorReply {
  if (err instanceof ApiError) return { status: err.status, headers: err.headers, body: err.toBody(), internal: false };
  const fe = err as Partial<FastifyError>;
  const known = fe.code ? FASTIFY_CODES[fe.code] : undefined;
  if (known) return { status: ERRORS[known[0]].status, headers: NO_HEADERS, body: errorBody(known[0], known[1]), internal: false };
  const status = fe.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const [code, message] = BY_STATUS[status] ?? ['invalid_request', 'Bad request.'];
    return { status, headers: NO_HEADERS, body: errorBody(code, message), internal: false };
  }
  return { status: 500, headers: NO_HEADERS, body: errorBody('internal_error', 'Internal server error.'), internal: true };
}

/**
 * Logs an unexpected error; the message line is left out: parser messages can quote request or runtime text. `log`
 * carries no request bindings (the node's logger, not `req.log`): the request id is this line's one `reqId`.
 */
function logInternal(log: FastifyBaseLogger, err: Error, reqId: string): void {
  const stack = err.stack?.split('\n').slice(1).join('\n');
  log.error({ err: { name: err.name, code: (err as Partial<FastifyError>).code, stack }, reqId }, 'unhandled error');
}

/** Fastify's not-found handler: a path (or method) no route serves. */
export function handleNotFound(req: FastifyRequest, reply: FastifyReply): void {
  reply.code(404).send(errorBody('not_found', `Unknown route: ${req.method} ${req.url.split('?')[0]}`));
}

/** Fastify's error handler: the same answers as `sendError`, through the reply. */
export function handleError(err: FastifyError | ApiError | Error, req: FastifyRequest, reply: FastifyReply): void {
  // Fastify reads and parses a body for its not-found route as for any other; what is wrong with a body no route
  // would take is beside the point: the answer is that the path is unknown (was 400 invalid_json for an empty or
  // malformed JSON body, 413 for a large one).
  if (req.is404 && (err as Partial<FastifyError>).code?.startsWith('FST_ERR_CTP_') === true) {
    handleNotFound(req, reply);
    return;
  }
  const r = errorReply(err);
  if (r.internal) logInternal(req.server.log, err, req.id);
  // Answered before its body was read (413, 415, ...): the connection closes once the client has sent it.
  if (!req.raw.complete) lingerOnClose(req.raw.socket);
  reply.code(r.status).headers(r.headers).send(r.body);
}

/**
 * Fastify's `frameworkErrors`: errors raised before routing (a malformed or over-long URL), where no hook runs.
 * Same OpenAI body as every other error, with the request id.
 */
export function handleFrameworkError(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', req.id);
  handleError(err, req, reply);
}

/** Writes the answer to an error on a raw response (the chat routes); returns its status. */
export function sendError(res: ClientResponse, err: unknown, log: FastifyBaseLogger, reqId: string): number {
  const e = err instanceof Error ? err : new Error(String(err));
  const r = errorReply(e);
  if (r.internal) logInternal(log, e, reqId);
  if (res.headersSent) {
    // A stream held through a cold start (src/scale) has its SSE headers out: the answer is an error event.
    // Otherwise only a bug gets here (streams end their own failures); close what was started.
    const sse = String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');
    if (!res.writableEnded)
      res.end(sse ? streamErrorEvent(e instanceof ApiError ? e : new ApiError(r.body.error.code as ErrorCode, r.body.error.message)) : undefined);
    return r.status;
  }
  const body = JSON.stringify(r.body);
  for (const name in r.headers) res.setHeader(name, r.headers[name]!);
  res.writeHead(r.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
  return r.status;
}

/** Node's parser errors that get their own answer; any other is a 400. */
const CLIENT_ERRORS: Readonly<Record<string, readonly [number, ErrorCode, string]>> = {
  HPE_HEADER_OVERFLOW: [431, 'request_too_large', 'The request line and headers are too large: shorten the URL or the headers.'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'invalid_request', 'The request was not received in time.'],
};

/**
 * The server's `clientError` (Fastify's `clientErrorHandler`): a request Node's HTTP parser refused, before there is
 * any request object. The same OpenAI body as every other error, written on the socket, which then closes.
 */
export function handleClientError(err: Error & { code?: string; reason?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const known = CLIENT_ERRORS[err.code ?? ''];
  // llhttp's reason is a fixed text ("Transfer-Encoding can't be present with Content-Length"), never request bytes.
  const why = err.code?.startsWith('HPE_') === true && typeof err.reason === 'string' ? `: ${err.reason}` : '';
  const [status, code, message] = known ?? [400, 'invalid_request', `The request is not valid HTTP/1.1${why}.`];
  // As Node's own handler: nothing is written over a response already under way on this connection.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent: boolean } | null })._httpMessage;
  if (socket.writable && inFlight?.headersSent !== true) {
    const body = JSON.stringify(errorBody(code, message));
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
