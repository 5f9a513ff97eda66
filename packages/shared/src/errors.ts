/** The one error table: code -> HTTP status -> OpenAI error `type`. */
export const ERRORS = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  context_length_exceeded: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  missing_api_key: { status: 401, type: 'authentication_error' },
  permission_denied: { status: 403, type: 'permission_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  concurrency_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  upstream_error: { status: 502, type: 'api_error' },
  no_healthy_upstream: { status: 503, type: 'api_error' },
  service_unavailable: { status: 503, type: 'api_error' },
  /** A serverless deployment's cold start outlasted the request's hold deadline (or would). */
  deployment_scaling_up: { status: 503, type: 'api_error' },
  /** A dedicated deployment its owner stopped (or whose replicas failed to start): retrying does not help. */
  deployment_stopped: { status: 503, type: 'api_error' },
  deployment_failed: { status: 503, type: 'api_error' },
  upstream_timeout: { status: 504, type: 'api_error' },
  internal_error: { status: 500, type: 'api_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof ERRORS;

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** Builds the OpenAI-shaped error body for a code from the table. */
export function errorBody(code: ErrorCode, message: string, param: string | null = null): OpenAIErrorBody {
  return { error: { message, type: ERRORS[code].type, param, code } };
}

/** An error that carries its table code; the data plane's handler renders it. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly headers: Readonly<Record<string, string>>;
  constructor(code: ErrorCode, message: string, param: string | null = null, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.param = param;
    // A retry cannot help until someone starts the deployment: OpenAI's SDKs read this header and do not retry.
    this.headers = code === 'deployment_stopped' || code === 'deployment_failed' ? { 'x-should-retry': 'false', ...headers } : headers;
  }
  get status(): number {
    return ERRORS[this.code].status;
  }
  toBody(): OpenAIErrorBody {
    return errorBody(this.code, this.message, this.param);
  }
}
