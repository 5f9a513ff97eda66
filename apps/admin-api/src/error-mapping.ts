import type { Socket } from 'node:net';
import { TRPCError } from '@trpc/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { errorBody, type ErrorCode } from '@infer/shared';
import { asServiceError, ServiceError, type ServiceErrorCode } from './errors.ts';

/**
 * The one translation of failures for every transport: a ServiceError (or a database data
 * exception, which is bad input) keeps its safe message, code and `param`; anything else is a
 * masked 500 that only the log describes.
 */

/**
 * Runs a service call for a transport whose argument has another name than the service's input field:
 * an error's `param` then names the argument the caller gave (`names`: service field -> argument).
 */
export async function withArgumentNames<T>(names: Readonly<Record<string, string>>, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const renamed = err instanceof ServiceError && err.param !== null ? names[err.param] : undefined;
    if (renamed === undefined) throw err;
    const e = err as ServiceError;
    // A message that names the argument first ("entryName must be …") names the caller's own.
    const message = e.message.startsWith(`${e.param} `) ? `${renamed}${e.message.slice(e.param!.length)}` : e.message;
    throw new ServiceError(e.code, message, renamed, { retryAfterS: e.retryAfterS });
  }
}

// ---- tRPC ----------------------------------------------------------------------------------

const TRPC_CODE: Readonly<Record<ServiceErrorCode, TRPCError['code']>> = Object.freeze({
  not_found: 'NOT_FOUND',
  conflict: 'CONFLICT',
  invalid: 'BAD_REQUEST',
  forbidden: 'FORBIDDEN',
  unauthenticated: 'UNAUTHORIZED',
  rate_limited: 'TOO_MANY_REQUESTS',
  service_unavailable: 'SERVICE_UNAVAILABLE',
});

/** The tRPC error for a domain failure, or undefined (left to tRPC: a masked 500). */
export function toTrpcError(err: unknown): TRPCError | undefined {
  if (err instanceof TRPCError) return err;
  const domain = asServiceError(err);
  return domain ? new TRPCError({ code: TRPC_CODE[domain.code], message: domain.message, cause: domain }) : undefined;
}

/** tRPC's `responseMeta`: a refusal that says when to retry sends `Retry-After` (the longest wait of a batch). */
export function trpcResponseMeta({ errors }: { readonly errors: readonly TRPCError[] }): { headers?: Record<string, string> } {
  const waits = errors.map((e) => (e.cause instanceof ServiceError ? e.cause.retryAfterS : undefined)).filter((s) => s !== undefined);
  return waits.length > 0 ? { headers: { 'retry-after': String(Math.max(...waits)) } } : {};
}

interface ZodLikeIssue {
  readonly path?: readonly PropertyKey[];
  readonly message?: string;
}

const pathOf = (path: readonly PropertyKey[] | undefined): string =>
  (path ?? [])
    .map((p) => (typeof p === 'object' && p !== null && 'key' in p ? String((p as { key: unknown }).key) : String(p)))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');

function zodIssues(cause: unknown): readonly ZodLikeIssue[] | undefined {
  if (typeof cause !== 'object' || cause === null || !('issues' in cause)) return undefined;
  const issues = (cause as { issues: unknown }).issues;
  return Array.isArray(issues) ? (issues as ZodLikeIssue[]) : undefined;
}

/**
 * tRPC's error shape with a readable message: an input error names the field(s)
 * ("name: Too small: expected string to have >=1 characters") instead of zod's JSON dump, and
 * `data.param` names the first one; internal errors say nothing; no stack.
 */
export function formatTrpcError<S extends { message: string; data: object }>({ shape, error }: { shape: S; error: TRPCError }): S {
  const cause = error.cause;
  let param: string | null = null;
  let message = shape.message;
  const issues = cause instanceof ServiceError ? undefined : zodIssues(cause);
  if (cause instanceof ServiceError) param = cause.param;
  else if (issues && issues.length > 0) {
    param = pathOf(issues[0]?.path) || null;
    message = issues.map((i) => (pathOf(i.path) ? `${pathOf(i.path)}: ${i.message ?? 'invalid'}` : (i.message ?? 'invalid input'))).join('; ');
  }
  if (error.code === 'INTERNAL_SERVER_ERROR') message = 'Internal server error.';
  return { ...shape, message, data: { ...shape.data, param, stack: undefined } };
}

// ---- GraphQL -------------------------------------------------------------------------------

const GRAPHQL_HTTP_STATUS: Readonly<Partial<Record<ServiceErrorCode, number>>> = Object.freeze({
  unauthenticated: 401,
  rate_limited: 429,
  service_unavailable: 503,
});

/**
 * A ServiceError as a GraphQL error: its (safe) message, code and param; nothing else. `wholeRequest`: the request
 * itself is refused before any operation runs (its caller), so the answer takes the error's own HTTP status (a 403
 * for a cookie from a foreign Origin, as tRPC answers), not the 400 of an operation that never ran.
 */
export function toGraphQLError(err: ServiceError, path?: readonly (string | number)[], wholeRequest = false): GraphQLError {
  const status = GRAPHQL_HTTP_STATUS[err.code] ?? (wholeRequest ? err.status : undefined);
  // Yoga turns `http` into the response's status and headers and leaves it out of the body.
  const headers = err.retryAfterS !== undefined ? { 'retry-after': String(err.retryAfterS) } : undefined;
  return createGraphQLError(err.message, {
    path,
    extensions: { code: err.code, param: err.param, ...(status ? { http: { status, ...(headers ? { headers } : {}) } } : {}) },
  });
}

const isGraphQLError = (e: unknown): e is Error & { originalError?: unknown; path?: readonly (string | number)[] } =>
  e instanceof Error && e.name === 'GraphQLError';

/** The innermost cause of a GraphQL error (variable coercion wraps a scalar's error twice), or undefined. */
function rootCause(error: unknown): unknown {
  let cause = isGraphQLError(error) ? error.originalError : undefined;
  while (isGraphQLError(cause) && cause.originalError) cause = cause.originalError;
  return cause;
}

/** Yoga copies a request parser's own error (name and message) into `extensions.originalError`: internals, never shown. */
function withoutOriginalError(error: GraphQLError): GraphQLError {
  if (error.extensions?.['originalError'] === undefined) return error;
  const { originalError: _internal, ...extensions } = error.extensions;
  return createGraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, extensions });
}

/** Yoga's `maskError`: domain errors shown, graphql's own parse/validation errors shown, the rest masked. */
export function maskGraphQLError(error: unknown, message: string, onUnexpected?: (err: unknown) => void): Error {
  if (error instanceof ServiceError) return toGraphQLError(error);
  const path = isGraphQLError(error) ? error.path : undefined;
  const cause = rootCause(error);
  if (cause instanceof ServiceError) {
    // A scalar's ServiceError inside a variable error: graphql's message names the variable, keep it.
    const variableError = !path && isGraphQLError(error) && error.originalError !== cause;
    return toGraphQLError(variableError ? new ServiceError(cause.code, (error as Error).message, cause.param) : cause, path);
  }
  const domain = asServiceError(cause);
  if (domain) return toGraphQLError(domain, path);
  // Parse, validation and coercion errors are graphql's own (no foreign cause): safe to show.
  if (isGraphQLError(error) && (cause === undefined || isGraphQLError(cause))) return withoutOriginalError(error as GraphQLError);
  onUnexpected?.(cause ?? error);
  return createGraphQLError(message, { extensions: { code: 'internal_error' } });
}

// ---- plain HTTP (Fastify routes) -------------------------------------------------------------

/** The OpenAI-shaped error code of a plain HTTP status. */
export function httpStatusCode(status: number): ErrorCode {
  switch (status) {
    case 401:
      return 'invalid_api_key';
    case 403:
      return 'permission_denied';
    case 404:
      return 'not_found';
    case 405:
      return 'method_not_allowed';
    case 413:
      return 'request_too_large';
    case 415:
      return 'unsupported_media_type';
    case 429:
      return 'rate_limit_exceeded';
    default:
      return 'invalid_request';
  }
}

/**
 * A refusal of a /graphql request before any operation runs (bad JSON, content type, method, Accept), in the shape
 * GraphQL clients read: `{"errors": [{"message", "extensions": {"code", "param"}}]}`.
 */
export const graphqlErrorBody = (code: string, message: string, param: string | null = null) => ({ errors: [{ message, extensions: { code, param } }] });

const isGraphQLPath = (url: string): boolean => url === '/graphql' || url.startsWith('/graphql?');

/** The answer to a path (or method) no route serves: 404 not_found naming it. */
export function sendNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.code(404).send(errorBody('not_found', `Route ${request.method} ${request.url.split('?')[0] ?? '/'} not found.`));
}

/** The answer to a method a route does not serve: 405 method_not_allowed with `Allow` (`allow`: the methods it does). */
export function sendMethodNotAllowed(request: FastifyRequest, reply: FastifyReply, allow: readonly string[]): FastifyReply {
  const path = request.url.split('?')[0] ?? '/';
  return reply
    .code(405)
    .header('allow', allow.join(', '))
    .send(errorBody('method_not_allowed', `${request.method} is not allowed on ${path}; allowed: ${allow.join(', ')}.`));
}

/**
 * Fastify's `frameworkErrors`: a request its router refuses before any route or hook (a malformed percent-encoding,
 * an over-long path parameter) gets the API's error shape, not Fastify's own. The message does not echo the URL.
 */
export function sendFrameworkError(err: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (err.code === 'FST_ERR_BAD_URL') {
    return reply.code(400).send(errorBody('invalid_request', 'The request URL is not valid: it has a malformed percent-encoding (%XX).'));
  }
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return reply.code(414).send(errorBody('invalid_request', 'The request URL is too long.'));
  return sendHttpError(err, request, reply);
}

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses (headers too large, malformed HTTP, a request that
 * took too long) never reaches Fastify's routing; the socket gets an OpenAI-shaped JSON answer and is closed.
 */
export function writeClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, code, message]: [number, string, ErrorCode, string] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'request_too_large', 'The request headers are too large.']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'invalid_request', 'The request took too long to arrive.']
        : [400, 'Bad Request', 'invalid_request', 'The request is not valid HTTP.'];
  const body = JSON.stringify(errorBody(code, message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** Fastify's error handler: OpenAI-shaped bodies (GraphQL-shaped on /graphql), domain errors with their status, 5xx masked. */
export function sendHttpError(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // Fastify reads and parses a body for its not-found route as for any other; what is wrong with a body no route
  // would take is beside the point: the path is unknown (was 400 invalid_json for an empty or malformed JSON body).
  const fastifyCode = (err as { code?: unknown } | null)?.code;
  if (request.is404 && typeof fastifyCode === 'string' && fastifyCode.startsWith('FST_ERR_CTP_')) return sendNotFound(request, reply);
  const graphql = isGraphQLPath(request.url);
  const body = (code: string, message: string, param: string | null = null) =>
    graphql ? graphqlErrorBody(code, message, param) : errorBody(code as ErrorCode, message, param);
  const domain = asServiceError(err);
  if (domain) {
    if (domain.retryAfterS !== undefined) void reply.header('retry-after', String(domain.retryAfterS));
    return reply.code(domain.status).send(graphql ? graphqlErrorBody(domain.code, domain.message, domain.param) : domain.toBody());
  }
  const e = err as { statusCode?: number; code?: string; message?: string };
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500;
  if (status >= 500) {
    request.log.error({ err }, 'request failed');
    return reply.code(status === 503 ? 503 : 500).send(body(status === 503 ? 'service_unavailable' : 'internal_error', 'Internal server error.'));
  }
  const code = e.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'invalid_json' : httpStatusCode(status);
  return reply.code(status).send(body(code, e.message ?? 'Bad request.'));
}
