import { createHash, timingSafeEqual } from 'node:crypto';
import type { onRequestAsyncHookHandler } from 'fastify';
import { errorBody } from '@infer/shared';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** An onRequest hook admitting only `Authorization: Bearer <nodeToken>` (constant-time compare). */
export function requireNodeToken(nodeToken: string): onRequestAsyncHookHandler {
  if (nodeToken.length === 0) throw new Error('nodeToken must not be empty');
  const expected = digest(nodeToken);
  return async (request, reply) => {
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) {
      return reply.code(401).send(errorBody('missing_api_key', 'Missing node token: send Authorization: Bearer <NODE_TOKEN>.'));
    }
    if (!timingSafeEqual(digest(match[1]), expected)) {
      return reply.code(401).send(errorBody('invalid_api_key', 'Invalid node token.'));
    }
  };
}
