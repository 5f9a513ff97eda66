import type { ClientResponse } from '../front/client-response.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

// The console's playground calls the data plane from the browser with a bearer key (no cookies), so any
// origin may call; the key is the credential.
const ALLOW_HEADERS = 'authorization, content-type, x-request-id, x-scale-up-timeout';
const EXPOSE_HEADERS =
  'x-request-id, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, x-ratelimit-reset-requests, ' +
  'x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens, retry-after, x-should-retry, x-cold-start, x-cold-start-wait-ms';
/** A comma-separated list of header names (RFC 9110 tokens), as browsers send in Access-Control-Request-Headers. */
const HEADER_NAME_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;

/**
 * The headers a preflight allows: every one the browser asks for, since no credential rides on a cookie here (SDKs
 * send headers of their own: the OpenAI SDKs' `x-stainless-*`, `openai-organization`, `openai-project`), else
 * our own list.
 */
function allowedHeaders(requested: string | string[] | undefined): string {
  const asked = typeof requested === 'string' ? requested.trim() : '';
  return asked.length > 0 && asked.length <= 2048 && HEADER_NAME_LIST.test(asked) ? asked.toLowerCase() : ALLOW_HEADERS;
}

/** CORS headers of an actual (non-preflight) cross-origin response. */
export function setCorsHeaders(reply: FastifyReply): void {
  reply.header('access-control-allow-origin', '*');
  reply.header('access-control-expose-headers', EXPOSE_HEADERS);
}

/** The same headers, on a raw response (the chat fast path). */
export function setRawCorsHeaders(res: ClientResponse): void {
  res.setHeader('access-control-allow-origin', '*');
  res.setHeader('access-control-expose-headers', EXPOSE_HEADERS);
}

/** Answers preflight `OPTIONS` on the inference routes (no auth: browsers send no credentials here). */
export async function corsRoutes(app: FastifyInstance): Promise<void> {
  const preflight = (req: FastifyRequest, reply: FastifyReply): void => {
    reply
      .code(204)
      .header('access-control-allow-origin', '*')
      .header('access-control-allow-methods', 'GET, POST, OPTIONS')
      .header('access-control-allow-headers', allowedHeaders(req.headers['access-control-request-headers']))
      .header('vary', 'access-control-request-headers')
      .header('access-control-max-age', '86400')
      .send();
  };
  for (const url of [
    '/endpoints/v1/chat/completions',
    '/endpoints/v1/models',
    '/endpoints/v1/models/*',
    '/funccall/:tenant/endpoints/:name/v1/chat/completions',
    '/funccall/:tenant/endpoints/:name/v1/models',
    '/funccall/:tenant/endpoints/:name/v1/models/*',
  ]) {
    // Answered in onRequest, before body parsing: a preflight sent with a JSON content type and no body is still a 204.
    app.options(
      url,
      {
        config: { metricRoute: 'preflight', metricMode: 'none' },
        onRequest: (req, reply, done) => {
          preflight(req, reply);
          done();
        },
      },
      preflight,
    );
  }
}
