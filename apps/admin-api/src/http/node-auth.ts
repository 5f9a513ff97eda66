import { createHash, timingSafeEqual } from 'node:crypto';
import type { onRequestAsyncHookHandler } from 'fastify';
import { errorBody } from '@infer/shared';
import type { Db } from '../db.ts';
import { authenticateNodeCredential, type NodeIdentity } from '../modules/nodes/node-credentials.service.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set on `/internal/v1/*` requests once the node authenticated. */
    node?: NodeIdentity;
  }
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export interface NodeAuthOptions {
  readonly db: Db;
  /**
   * The bootstrap credential (NODE_TOKEN): accepted beside per-node credentials so a single-machine
   * install, the tests and the bench run without issuing any. Unset: only per-node `infn_…`
   * credentials are accepted, so a leaked shared token bills no tenant and opens no upstream key.
   */
  readonly bootstrapToken?: string | undefined;
}

/**
 * An onRequest hook admitting `Authorization: Bearer <credential>`: a valid, unrevoked node credential
 * (`infn_…`), or the bootstrap token when one is configured (constant-time compare). Sets `request.node`.
 */
export function requireNodeCredential(opts: NodeAuthOptions): onRequestAsyncHookHandler {
  if (opts.bootstrapToken !== undefined && opts.bootstrapToken.length === 0) throw new Error('bootstrapToken must not be empty (leave it unset to disable it)');
  const expected = opts.bootstrapToken === undefined ? null : digest(opts.bootstrapToken);
  return async (request, reply) => {
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) {
      return reply.code(401).send(errorBody('missing_api_key', 'Missing node credential: send Authorization: Bearer <node credential>.'));
    }
    const secret = match[1];
    if (expected !== null && timingSafeEqual(digest(secret), expected)) {
      request.node = { credentialId: null };
      return;
    }
    const identity = await authenticateNodeCredential(opts.db, secret);
    if (identity === null) return reply.code(401).send(errorBody('invalid_api_key', 'Invalid or revoked node credential.'));
    request.node = identity;
  };
}
