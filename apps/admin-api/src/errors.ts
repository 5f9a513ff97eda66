import { ERRORS, type OpenAIErrorBody } from '@infer/shared';

export type ServiceErrorCode = 'not_found' | 'conflict' | 'invalid' | 'forbidden' | 'unauthenticated' | 'rate_limited' | 'service_unavailable';

const STATUS: Readonly<Record<ServiceErrorCode, { status: number; type: string }>> = Object.freeze({
  not_found: ERRORS.not_found,
  conflict: { status: 409, type: 'invalid_request_error' },
  invalid: ERRORS.invalid_request,
  forbidden: ERRORS.permission_denied,
  unauthenticated: ERRORS.invalid_api_key,
  rate_limited: ERRORS.rate_limit_exceeded,
  service_unavailable: ERRORS.service_unavailable,
});

export interface ServiceErrorOptions {
  /** `rate_limited`: whole seconds until a retry can succeed (every transport sends it as `Retry-After`). */
  readonly retryAfterS?: number;
}

/** A domain failure the adapters (HTTP, tRPC, GraphQL) translate; its message is safe to show. */
export class ServiceError extends Error {
  readonly code: ServiceErrorCode;
  readonly param: string | null;
  /** Whole seconds, at least 1, when the refusal says when to retry; otherwise undefined. */
  readonly retryAfterS: number | undefined;
  constructor(code: ServiceErrorCode, message: string, param: string | null = null, opts: ServiceErrorOptions = {}) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.param = param;
    this.retryAfterS = opts.retryAfterS === undefined ? undefined : Math.max(1, Math.ceil(opts.retryAfterS));
  }
  get status(): number {
    return STATUS[this.code].status;
  }
  toBody(): OpenAIErrorBody {
    return { error: { message: this.message, type: STATUS[this.code].type, param: this.param, code: this.code } };
  }
}

export const notFound = (what: string): ServiceError => new ServiceError('not_found', `${what} not found`);

/** True for a Postgres unique-violation error (both node-postgres and PGlite carry `code`). */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

/**
 * True for a Postgres data exception (SQLSTATE class 22: a value out of range, text with a NUL
 * character, an impossible date): the caller sent a value the database cannot hold.
 */
export function isDataException(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /^22[0-9A-Z]{3}$/.test(code);
}

/** True for a statement cancelled by `statement_timeout` (SQLSTATE 57014) on an API caller's pool. */
export function isStatementTimeout(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '57014';
}

/**
 * The domain error an adapter should report for `err`: a ServiceError as is, a database data
 * exception as `invalid` (bad input, never a 500); undefined for anything else (a masked 500).
 */
export function asServiceError(err: unknown): ServiceError | undefined {
  if (err instanceof ServiceError) return err;
  if (isStatementTimeout(err)) {
    return new ServiceError('invalid', 'the request took too long and was stopped (statement timeout): ask for a shorter range or fewer items');
  }
  if (isDataException(err)) {
    return new ServiceError('invalid', 'a value is out of range or not valid text (e.g. it contains a NUL character)');
  }
  if (isDatabaseUnavailable(err)) {
    return new ServiceError('service_unavailable', 'the database is unreachable or busy just now; try again shortly', null, {
      retryAfterS: DATABASE_RETRY_AFTER_S,
    });
  }
  return undefined;
}

/** Seconds a caller is told to wait when the database is unreachable (the pool reconnects on the next query). */
const DATABASE_RETRY_AFTER_S = 2;

/** Socket errors of a database connection that could not be made or was lost. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** node-postgres's own messages for a lost or unobtainable connection (they carry no code). */
const CONNECTION_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended unexpectedly)/;

/**
 * True when `err` says the database cannot be reached now, not that the request was wrong: no connection (refused,
 * reset, timed out), PostgreSQL shutting down or starting (SQLSTATE 57P01-57P03), a connection exception (class 08),
 * or too many connections (53300). The caller gets a 503 with Retry-After, never a 400 or a masked 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown };
  if (typeof e.code === 'string') {
    if (CONNECTION_CODES.has(e.code) || /^08[0-9A-Z]{3}$/.test(e.code) || e.code === '57P01' || e.code === '57P02' || e.code === '57P03' || e.code === '53300')
      return true;
  }
  // Node's connect over several addresses (IPv4 and IPv6) fails with an AggregateError of each attempt's error.
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((inner) => isDatabaseUnavailable(inner))) return true;
  return typeof e.message === 'string' && CONNECTION_MESSAGES.test(e.message);
}
