import { ApiError, ERRORS, errorBody } from '@infer/shared';
import type { ErrorCode } from '@infer/shared';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

const FASTIFY_CODES: Readonly<Record<string, readonly [ErrorCode, string]>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['unsupported_media_type', "Unsupported Content-Type: send the body as 'application/json'."],
  FST_ERR_CTP_BODY_TOO_LARGE: ['request_too_large', 'The request body is too large.'],
  FST_ERR_CTP_INVALID_JSON_BODY: ['invalid_json', 'The request body is not valid JSON.'],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['invalid_json', 'The request body is empty; send a JSON object.'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['invalid_request', 'The Content-Length header does not match the body.'],
};

const BY_STATUS: Readonly<Record<number, readonly [ErrorCode, string]>> = {
  404: ['not_found', 'Not found.'],
  405: ['method_not_allowed', 'Method not allowed.'],
  413: ['request_too_large', 'The request body is too large.'],
  415: ['unsupported_media_type', "Unsupported Content-Type: send the body as 'application/json'."],
};

/** Maps any error to an OpenAI-shaped body; 5xx messages are generic and logged without request data. */
export function handleError(err: FastifyError | ApiError | Error, req: FastifyRequest, reply: FastifyReply): void {
  if (err instanceof ApiError) {
    reply.code(err.status).headers(err.headers).send(err.toBody());
    return;
  }
  const fe = err as Partial<FastifyError>;
  const known = fe.code ? FASTIFY_CODES[fe.code] : undefined;
  if (known) {
    reply.code(ERRORS[known[0]].status).send(errorBody(known[0], known[1]));
    return;
  }
  const status = fe.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const [code, message] = BY_STATUS[status] ?? ['invalid_request', 'Bad request.'];
    reply.code(status).send(errorBody(code, message));
    return;
  }
  // The message line is left out: parser messages can quote request or runtime text.
  const stack = err.stack?.split('\n').slice(1).join('\n');
  req.log.error({ err: { name: err.name, code: fe.code, stack }, reqId: req.id }, 'unhandled error');
  reply.code(500).send(errorBody('internal_error', 'Internal server error.'));
}
