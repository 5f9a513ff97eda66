import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const SANE_REQUEST_ID = /^[\w.:@-]{1,128}$/;

/** Accepts a caller's `x-request-id` when it is short and plain, else a fresh UUID. */
export function genReqId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/**
 * The id a request's usage record and token reservation are keyed by. The usage ingest is idempotent on it,
 * so it must be unique per request: a caller's own `x-request-id` (which it may reuse on every call) gets a
 * fresh suffix (`<caller id>.<uuid>`, within the record's 128 characters); a generated id is already unique.
 */
export function meterId(requestId: string, fromCaller: boolean): string {
  return fromCaller ? `${requestId.length > 90 ? requestId.slice(0, 90) : requestId}.${randomUUID()}` : requestId;
}
