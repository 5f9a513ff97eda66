import { performance } from 'node:perf_hooks';
import { ApiError } from '@infer/shared';
import type { FastifyInstance, FastifyReply, FastifyRequest, preParsingHookHandler } from 'fastify';
import { authenticateRequest } from '../auth.ts';
import type { ConfigStore } from '../config/config-store.ts';
import { modelObject } from '../config/config-view.ts';
import { dedicatedModel, findDeployment, unknownSharedModel } from './chat-handler.ts';
import type { ChatHandler, DedicatedParams } from './chat-handler.ts';

export interface InferenceRoutesOptions {
  readonly store: ConfigStore;
  readonly chat: ChatHandler;
}

/**
 * Compressed request bodies are not decoded: one with a Content-Encoding other than `identity` is refused before it is
 * read (415), rather than parsed as if it were plain JSON. The fast path leaves every request with the header here.
 */
const refuseEncodedBody: preParsingHookHandler = (req, _reply, payload, done) => {
  const encoding = req.headers['content-encoding'];
  if (encoding === undefined || encoding.trim().toLowerCase() === 'identity') done(null, payload);
  else {
    const named = encoding.length > 40 ? `${encoding.slice(0, 40)}...` : encoding;
    done(new ApiError('unsupported_media_type', `Unsupported Content-Encoding '${named}': send the request body uncompressed.`));
  }
};

/**
 * The chat and model routes of both surfaces, behind bearer-key auth. Most chat requests never get here:
 * the fast path (chat-fast-path.ts) serves plain ones before Fastify; these routes take the rest (odd
 * content types, chunked bodies, encoded or trailing-slash URLs) into the same chat handler.
 */
export async function inferenceRoutes(app: FastifyInstance, opts: InferenceRoutesOptions): Promise<void> {
  const { store, chat } = opts;
  app.removeContentTypeParser('text/plain'); // chat bodies are JSON only: anything else is a 415

  app.addHook('onRequest', (req, _reply, done) => {
    const key = authenticateRequest(store, req.headers.authorization, Date.now());
    if (key instanceof ApiError) {
      done(key);
      return;
    }
    req.apiKey = key;
    done();
  });

  const serveChat = (req: FastifyRequest, reply: FastifyReply, mode: 'shared' | 'dedicated', dedicated: DedicatedParams | null): Promise<void> => {
    const res = reply.raw;
    const headers = reply.getHeaders();
    for (const name in headers) {
      const value = headers[name];
      if (value !== undefined) res.setHeader(name, value);
    }
    reply.hijack();
    req.metricEndpoint = null; // the chat handler counts and logs it
    const elapsed = reply.elapsedTime;
    return chat.serve(
      {
        requestId: req.id,
        callerId: req.headers['x-request-id'] === req.id,
        res,
        startedAt: Date.now() - elapsed,
        startPerf: performance.now() - elapsed,
        mode,
        // The node's logger, as on the fast path: the chat lines name their `reqId` themselves (req.log binds it too).
        log: app.log,
      },
      req.apiKey!,
      dedicated,
      req.body,
    );
  };

  app.post('/endpoints/v1/chat/completions', { config: { metricRoute: 'chat', metricMode: 'shared' }, preParsing: refuseEncodedBody }, (req, reply) =>
    serveChat(req, reply, 'shared', null),
  );

  app.get('/endpoints/v1/models', { config: { metricRoute: 'models', metricMode: 'shared' } }, (_req, reply) => {
    reply.type('application/json').send(store.view!.sharedModelsJson);
  });

  app.post<{ Params: DedicatedParams }>(
    '/funccall/:tenant/endpoints/:name/v1/chat/completions',
    { config: { metricRoute: 'chat', metricMode: 'dedicated' }, preParsing: refuseEncodedBody },
    (req, reply) => serveChat(req, reply, 'dedicated', req.params),
  );

  app.get<{ Params: DedicatedParams }>(
    '/funccall/:tenant/endpoints/:name/v1/models',
    { config: { metricRoute: 'models', metricMode: 'dedicated' } },
    (req, reply) => {
      const target = findDeployment(store.view!, req.apiKey!, req.params);
      reply.send({ object: 'list', data: [modelObject(target.name, target.provider, target.created)] });
    },
  );

  // Retrieve one model (the SDKs' `models.retrieve`): the object the list gives, under the list's auth and visibility.
  // A wildcard, not a parameter: ids may hold a '/' (`<provider>/<model>`), sent as is or encoded (the router decodes it).
  app.get<{ Params: { '*': string } }>('/endpoints/v1/models/*', { config: { metricRoute: 'models', metricMode: 'shared' } }, (req, reply) => {
    const id = req.params['*'];
    const target = store.view!.endpointByName.get(id);
    if (target === undefined) throw unknownSharedModel(store.view!, id);
    reply.send(modelObject(target.name, target.provider, target.created));
  });

  app.get<{ Params: DedicatedParams & { '*': string } }>(
    '/funccall/:tenant/endpoints/:name/v1/models/*',
    { config: { metricRoute: 'models', metricMode: 'dedicated' } },
    (req, reply) => {
      const target = findDeployment(store.view!, req.apiKey!, req.params);
      // The names chat takes for this endpoint (its Name, or `<provider>/<Name>` as the console shows it): one rule.
      dedicatedModel(req.params['*'], target);
      reply.send(modelObject(target.name, target.provider, target.created));
    },
  );
}
