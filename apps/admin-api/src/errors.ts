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

/** A domain failure the adapters (HTTP, tRPC, GraphQL) translate; its message is safe to show. */
export class ServiceError extends Error {
  readonly code: ServiceErrorCode;
  readonly param: string | null;
  constructor(code: ServiceErrorCode, message: string, param: string | null = null) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.param = param;
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
