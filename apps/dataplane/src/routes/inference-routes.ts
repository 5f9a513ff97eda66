import { performance } from 'node:perf_hooks';
import { ApiError, chatRequestSchema, errorBody } from '@infer/shared';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate } from '../auth.ts';
import type { ConfigStore } from '../config/config-store.ts';
import { deploymentKey, modelObject } from '../config/config-view.ts';
import type { ConfigView, ResolvedKey, RouteTarget } from '../config/config-view.ts';
import { fastChatBody } from '../proxy/fast-chat-body.ts';
import { forwardChat } from '../proxy/forward-chat.ts';
import type { ForwardDeps } from '../proxy/forward-chat.ts';
import type { Limits } from '../limits/limits.ts';
import { validationError } from '../validation-error.ts';

export interface InferenceRoutesOptions extends ForwardDeps {
  readonly store: ConfigStore;
  readonly limits: Limits;
}

interface DedicatedParams {
  tenant: string;
  name: string;
}

const NO_REPLICA = 'No replica of this model is ready. Try again shortly.';

/** Resolves a dedicated URL for a key: 403 for another tenant's URL, 404 for no deployment. */
function findDeployment(view: ConfigView, key: ResolvedKey, params: DedicatedParams): RouteTarget {
  if (key.tenantSlug !== params.tenant) {
    throw new ApiError('permission_denied', `This API key does not belong to tenant '${params.tenant}'.`);
  }
  const target = view.deploymentByTenantAndName.get(deploymentKey(params.tenant, params.name));
  if (target === undefined) {
    throw new ApiError('model_not_found', `The dedicated endpoint '${params.name}' does not exist for tenant '${params.tenant}'.`, 'model');
  }
  return target;
}

/** Dedicated `model`: absent, the Name, or `<provider>/<Name>` (the provider label may differ). */
function dedicatedModel(model: string | undefined, name: string): string {
  if (model === undefined || model === name) return model ?? name;
  const slash = model.lastIndexOf('/');
  if (slash >= 0 && model.slice(slash + 1) === name) return model;
  throw new ApiError('model_not_found', `The model '${model}' is not served here; this endpoint serves '${name}' (or '<provider>/${name}').`, 'model');
}

/** The chat and model routes of both surfaces, behind bearer-key auth. */
export async function inferenceRoutes(app: FastifyInstance, opts: InferenceRoutesOptions): Promise<void> {
  const { store } = opts;
  app.removeContentTypeParser('text/plain'); // chat bodies are JSON only: anything else is a 415

  app.addHook('onRequest', (req, _reply, done) => {
    const key = authenticate(store.view, req.headers.authorization, Date.now());
    if (key instanceof ApiError) {
      done(key);
      return;
    }
    req.apiKey = key;
    done();
  });

  const chat = async (req: FastifyRequest, reply: FastifyReply, target: RouteTarget, mode: 'shared' | 'dedicated', clientModel: string, body: Record<string, unknown>): Promise<void> => {
    if (!target.ready) throw new ApiError('no_healthy_upstream', NO_REPLICA);
    const elapsed = reply.elapsedTime;
    // Context length, RPM/TPM reservation, replica slot (src/limits); the slot frees when the answer ends.
    const admission = await opts.limits.admit(req.id, req.apiKey!, target, body, reply);
    try {
      await forwardChat(opts, {
        requestId: req.id, startedAt: Date.now() - elapsed, startPerf: performance.now() - elapsed,
        key: req.apiKey!, target, mode, clientModel, body,
      }, reply);
    } finally {
      admission.end();
    }
  };

  const parseBody = (raw: unknown): Record<string, unknown> => {
    // Common, well-typed bodies skip zod; everything else gets the schema (and its error messages).
    const fast = fastChatBody(raw);
    if (fast !== null) return fast;
    const parsed = chatRequestSchema.safeParse(raw);
    if (!parsed.success) throw validationError(parsed.error);
    return parsed.data;
  };

  app.post('/endpoints/v1/chat/completions', { config: { metricRoute: 'chat', metricMode: 'shared' } }, (req, reply) => {
    const body = parseBody(req.body);
    const model = body['model'] as string | undefined;
    if (model === undefined) throw new ApiError('invalid_request', "Missing required parameter: 'model'.", 'model');
    const target = store.view!.endpointByName.get(model);
    if (target === undefined) throw new ApiError('model_not_found', `The model '${model}' does not exist or is not offered on the shared endpoint.`, 'model');
    return chat(req, reply, target, 'shared', model, body);
  });

  app.get('/endpoints/v1/models', { config: { metricRoute: 'models', metricMode: 'shared' } }, (_req, reply) => {
    reply.type('application/json').send(store.view!.sharedModelsJson);
  });

  app.post<{ Params: DedicatedParams }>('/funccall/:tenant/endpoints/:name/v1/chat/completions', { config: { metricRoute: 'chat', metricMode: 'dedicated' } }, (req, reply) => {
    const target = findDeployment(store.view!, req.apiKey!, req.params);
    const body = parseBody(req.body);
    const clientModel = dedicatedModel(body['model'] as string | undefined, target.name);
    return chat(req, reply, target, 'dedicated', clientModel, body);
  });

  app.get<{ Params: DedicatedParams }>('/funccall/:tenant/endpoints/:name/v1/models', { config: { metricRoute: 'models', metricMode: 'dedicated' } }, (req, reply) => {
    const target = findDeployment(store.view!, req.apiKey!, req.params);
    reply.send({ object: 'list', data: [modelObject(target.name, target.provider)] });
  });
}

/** Wrong methods on the chat paths answer 405 (no auth needed to learn that). */
export async function methodNotAllowedRoutes(app: FastifyInstance): Promise<void> {
  const handler = (_req: FastifyRequest, reply: FastifyReply): void => {
    reply.code(405).header('allow', 'POST').send(errorBody('method_not_allowed', 'Method not allowed: use POST.'));
  };
  for (const url of ['/endpoints/v1/chat/completions', '/funccall/:tenant/endpoints/:name/v1/chat/completions']) {
    app.route({ method: ['GET', 'PUT', 'PATCH', 'DELETE'], url, config: { metricRoute: 'chat', metricMode: 'none' }, handler });
  }
}
