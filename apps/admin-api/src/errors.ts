import { ERRORS, type OpenAIErrorBody } from '@infer/shared';

export type ServiceErrorCode = 'not_found' | 'conflict' | 'invalid' | 'forbidden' | 'unauthenticated' | 'rate_limited';

const STATUS: Readonly<Record<ServiceErrorCode, { status: number; type: string }>> = Object.freeze({
  not_found: ERRORS.not_found,
  conflict: { status: 409, type: 'invalid_request_error' },
  invalid: ERRORS.invalid_request,
  forbidden: ERRORS.permission_denied,
  unauthenticated: ERRORS.invalid_api_key,
  rate_limited: ERRORS.rate_limit_exceeded,
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
  return undefined;
}
