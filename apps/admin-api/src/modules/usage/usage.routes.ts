import type { FastifyPluginAsync } from 'fastify';
import { errorBody, usageBatchSchema } from '@infer/shared';
import type { Db } from '../../db.ts';
import { ingestUsage } from './usage.service.ts';

/** `POST /usage`: idempotent usage ingest from data-plane nodes (mount under the node credential guard; the tenant billed is the key's). */
export const usageRoutes: FastifyPluginAsync<{ readonly db: Db }> = async (app, { db }) => {
  app.post('/usage', { bodyLimit: 16 * 1024 * 1024 }, async (request, reply) => {
    const parsed = usageBatchSchema.safeParse(request.body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const param = issue?.path.length ? issue.path.join('.') : null;
      return reply.code(400).send(errorBody('invalid_request', `Invalid usage batch: ${issue?.message ?? 'bad body'}`, param));
    }
    const result = await ingestUsage(db, parsed.data.records);
    if (result.rejected > 0) {
      // A node sending records the key does not vouch for is forged or broken: worth an operator's look.
      request.log.warn({ rejected: result.rejected, node: request.node?.credentialId ?? 'bootstrap' }, 'usage records rejected');
    }
    return result;
  });
};
