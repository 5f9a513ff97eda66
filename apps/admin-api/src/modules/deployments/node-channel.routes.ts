import type { FastifyPluginAsync } from 'fastify';
import { errorBody, loadReportSchema, wakeRequestSchema } from '@infer/shared';
import type { DeploymentsContext } from './deployments-context.ts';
import { wakeForNode } from './deployments.service.ts';
import { ingestLoadReport } from './node-load.ts';

const invalid = (what: string, error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] }) => {
  const issue = error.issues[0];
  const param = issue?.path.length ? issue.path.map(String).join('.') : null;
  return errorBody('invalid_request', `Invalid ${what}: ${issue?.message ?? 'bad body'}`, param);
};

/**
 * The node channel of serverless deployments (mount under the node credential guard):
 * `POST /load` (about once a second per node) -> 204, `POST /wake` (a request is held) -> 202 `{ state }`.
 */
export const nodeChannelRoutes: FastifyPluginAsync<{ readonly deployments: DeploymentsContext }> = async (app, { deployments }) => {
  app.post('/load', { bodyLimit: 4 * 1024 * 1024 }, async (request, reply) => {
    const parsed = loadReportSchema.safeParse(request.body);
    if (!parsed.success) return reply.code(400).send(invalid('load report', parsed.error));
    const nodeKey = `${request.node?.credentialId ?? 'bootstrap'}:${parsed.data.nodeId}`;
    await ingestLoadReport(deployments.db, { nodeKey, deployments: parsed.data.deployments, coldStarts: parsed.data.coldStarts });
    return reply.code(204).send();
  });
  app.post('/wake', async (request, reply) => {
    const parsed = wakeRequestSchema.safeParse(request.body);
    if (!parsed.success) return reply.code(400).send(invalid('wake request', parsed.error));
    const result = await wakeForNode(deployments, parsed.data.nodeId, parsed.data.deploymentId);
    return reply.code(202).send(result);
  });
};
