import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { LogController } from 'fastify';
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import type { ConfigStore } from './config/config-store.ts';
import { handleClientError, handleError, handleFrameworkError, handleNotFound } from './error-handler.ts';
import './fastify-types.ts';
import { loggerOptions, logRequest } from './logging.ts';
import { createMetrics } from './metrics.ts';
import { createAddressGuard } from '@infer/shared/address-guard';
import { createMetricsServer } from './metrics-server.ts';
import type { MetricsListenerOptions } from './metrics-server.ts';
import { corsRoutes, setCorsHeaders } from './routes/cors-routes.ts';
import { healthRoutes } from './routes/health-routes.ts';
import { createChatFastPath } from './routes/chat-fast-path.ts';
import type { ChatFastPath, FastRoute } from './routes/chat-fast-path.ts';
import { installFront } from './front/http1-front.ts';
import type { Front } from './front/http1-front.ts';
import { servePipelined } from './front/pipelined.ts';
import type { InFlightCalls } from './proxy/forward-chat.ts';
import { createChatHandler } from './routes/chat-handler.ts';
import { inferenceRoutes } from './routes/inference-routes.ts';
import { collectRoutes, methodNotAllowedRoutes } from './routes/method-not-allowed-routes.ts';
import { exceedsJsonDepth, tooDeepError } from './proxy/json-depth.ts';
import { explainJsonError } from './proxy/forbidden-key.ts';
import { genReqId } from './request-id.ts';
import { createLimits } from './limits/limits.ts';
import type { LimitsOptions } from './limits/limits.ts';
import { createUpstreamPools, defaultTimeouts } from './upstream/upstream-pools.ts';
import { poolSizes } from './upstream/pool-sizes.ts';
import { DEFAULT_REPLICA_BASE_CONCURRENCY } from './limits/limits.ts';
import { createRouting } from './routing/create-routing.ts';
import type { RoutingOptions } from './routing/create-routing.ts';
import type { EjectionPolicy, UpstreamTimeouts } from './upstream/upstream-pools.ts';
import type { UsageSink } from './usage/usage-reporter.ts';
import { createScaleHolds } from './scale/scale-holds.ts';
import type { ScaleOptions } from './scale/scale-holds.ts';

export interface DataplaneAppOptions {
  readonly store: ConfigStore;
  readonly usage: UsageSink;
  /** Fastify logger options (default: pino at 'warn'), or false. */
  readonly logger?: FastifyServerOptions['logger'];
  /** A ready logger instance (takes precedence over `logger`). */
  readonly loggerInstance?: FastifyBaseLogger;
  /** Largest request body in bytes (default 1 MiB). */
  readonly bodyLimit?: number;
  readonly timeouts?: Partial<UpstreamTimeouts>;
  /**
   * Least connections per upstream origin; each pool is sized from the concurrency the limits admit to the
   * targets it serves (REPLICA_BASE_CONCURRENCY x Concurrency x replicas), so this only raises it.
   */
  readonly upstreamConnections?: number;
  /** Replica picking (src/routing): policy, metrics scraping, saturation hold. */
  readonly routing?: RoutingOptions;
  /** Consecutive failures that eject a replica, and its cool-down before the health probe. */
  readonly ejection?: Partial<EjectionPolicy>;
  /** Retries on another replica before the first byte (default 2). */
  readonly maxRetries?: number;
  /** Rate limits (RPM/TPM, in memory or Redis), replica concurrency and queue (see src/limits). */
  readonly limits?: LimitsOptions;
  /** Non-public CIDRs that tenants' external runtimes may still be dialled at (operator allow-list). */
  readonly allowedPrivateCidrs?: readonly string[];
  /** The internal `/metrics` listener, bound when the app listens (absent: no metrics endpoint at all). */
  readonly metricsListener?: MetricsListenerOptions | null;
  /** Serverless deployments (src/scale): hold through cold starts, wake, load reports (absent: no holding). */
  readonly scale?: ScaleOptions;
  /**
   * The node's own HTTP/1.1 front for plain chat requests (front/http1-front.ts; default true). False: Node's HTTP
   * server reads every request (the fast path still skips Fastify's routing).
   */
  readonly front?: boolean;
}

/** Builds the data-plane Fastify app (never listens). */
export function buildDataplaneApp(opts: DataplaneAppOptions): FastifyInstance {
  const timeouts: UpstreamTimeouts = Object.freeze({ ...defaultTimeouts, ...opts.timeouts });
  const bodyLimit = opts.bodyLimit ?? 1024 * 1024;
  // Plain chat requests are served before Fastify's router (routes/chat-fast-path.ts); the rest reach it.
  let fastPath: ChatFastPath | null = null;
  let front: Front | null = null;
  let closing = false;
  // Connections that never sent a request (below): the front says when one has.
  const unused = new Set<Socket>();
  const serverFactory = (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
    const serve = (req: IncomingMessage, res: ServerResponse): void => {
      if (fastPath === null || !fastPath.onRequest(req, res)) handler(req, res);
    };
    const server = createServer((req, res) => {
      if (servePipelined(req, res, serve)) serve(req, res);
    });
    if (opts.front !== false) {
      front = installFront<FastRoute>({
        server,
        route: (url, headers) => fastPath?.frontRoute(url, headers) ?? null,
        serve: (route, headers, res, body) => fastPath!.serve(route, headers, res, body),
        onRequest: (socket) => unused.delete(socket),
      });
    }
    // `Expect: 100-continue` with a body over the limit: the 413 at once, without asking for the body first (Node
    // otherwise sends 100 Continue for every such request).
    server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
      if (!(Number(req.headers['content-length']) > bodyLimit)) res.writeContinue();
      server.emit('request', req, res);
    });
    // What Fastify sets on the servers it creates itself.
    server.keepAliveTimeout = 72_000;
    server.requestTimeout = 0;
    server.setTimeout(0);
    return server;
  };
  const base = {
    bodyLimit,
    serverFactory,
    genReqId,
    requestIdHeader: false as const,
    // No per-request logs on the hot path.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
    frameworkErrors: handleFrameworkError,
    // Fastify puts it on the server, serverFactory's included.
    clientErrorHandler: handleClientError,
  };
  const app = opts.loggerInstance
    ? Fastify({ ...base, loggerInstance: opts.loggerInstance })
    : Fastify({
        ...base,
        logger: opts.logger ?? loggerOptions('warn'),
      });

  const metrics = createMetrics(opts.store);
  const metricsServer = opts.metricsListener ? createMetricsServer(metrics, opts.metricsListener) : null;
  app.decorate('metricsUrl', () => metricsServer?.url() ?? null);
  app.decorate('inFlightNow', () => metrics.inFlightNow());
  app.decorate('frontConnections', () => (front as Front | null)?.size() ?? 0);
  if (opts.front !== false) {
    metrics.section((lines) => {
      const f = front as Front | null;
      lines.push(
        '# HELP dataplane_front_connections Client connections the HTTP/1.1 front holds now (plain chat requests).',
        '# TYPE dataplane_front_connections gauge',
        `dataplane_front_connections ${f?.size() ?? 0}`,
        "# HELP dataplane_front_handovers_total Client connections the front handed to Node's HTTP server (another kind of request).",
        '# TYPE dataplane_front_handovers_total counter',
        `dataplane_front_handovers_total ${f?.handedOver() ?? 0}`,
      );
    });
  }
  if (metricsServer !== null) {
    // A metrics port that cannot bind must not take the inference surface down with it.
    app.addHook('onReady', async () => {
      try {
        await metricsServer.listen();
      } catch (err) {
        app.log.error({ reason: err instanceof Error ? err.message : String(err) }, 'metrics listener could not bind; /metrics is unavailable');
      }
    });
  }
  const baseConcurrency = opts.limits?.replicaBaseConcurrency ?? DEFAULT_REPLICA_BASE_CONCURRENCY;
  let connectionsByOrigin = opts.store.view ? poolSizes(opts.store.view, baseConcurrency) : new Map<string, number>();
  const pools = createUpstreamPools({
    timeouts,
    connections: opts.upstreamConnections,
    connectionsFor: (origin) => connectionsByOrigin.get(origin) ?? 1,
    ejection: opts.ejection,
    onEject: (origin, upstreamId, ejectionMs) => {
      metrics.ejection(upstreamId);
      app.log.warn({ origin, upstreamId, ejectionMs }, 'replica ejected by outlier detection');
    },
    onRestore: (origin) => app.log.warn({ origin }, 'replica back in rotation'),
    addressGuard: {
      guard: createAddressGuard({ allowedCidrs: opts.allowedPrivateCidrs }),
      isTenantOrigin: (origin) => opts.store.view?.tenantOrigins.has(origin) === true,
    },
  });
  if (opts.store.view) pools.retain(opts.store.view.origins);
  const unsubscribe = opts.store.onVersion((_v, view) => {
    connectionsByOrigin = poolSizes(view, baseConcurrency);
    pools.retain(view.origins);
    limits.follow(view);
  });
  const routing = createRouting(opts.routing ?? {}, pools, opts.store, metrics);
  const limits = createLimits(opts.limits ?? {}, (message, err) => app.log.warn({ reason: err instanceof Error ? err.message : String(err) }, message));
  app.addHook('onReady', () => limits.ready());
  const scale = createScaleHolds(opts.scale ?? { channel: null }, opts.store, (target) => limits.concurrency(target));
  metrics.section((lines) => scale.renderMetrics(lines));
  if (limits.redis !== null) {
    const redis = limits.redis;
    metrics.section((lines) => {
      lines.push(
        "# HELP dataplane_redis_fail_open 1 while rate limits are kept in this node's memory (Redis not connected, or its breaker open), else 0.",
        '# TYPE dataplane_redis_fail_open gauge',
        `dataplane_redis_fail_open ${redis.failingOpen() ? 1 : 0}`,
      );
    });
    metrics.redisBreaker(false);
    limits.redis.breaker.onChange((state) => {
      metrics.redisBreaker(state === 'open');
      if (state === 'open') app.log.warn('redis is not answering in time: circuit breaker open, limits fail open to this node');
      else app.log.warn('redis answers again: circuit breaker closed');
    });
  }

  app.decorateRequest('apiKey', null);
  app.decorateRequest('metricEndpoint', '');
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    if (req.headers.origin !== undefined) setCorsHeaders(reply);
    done();
  });
  const logInfo = ['trace', 'debug', 'info'].includes(app.log.level);
  app.addHook('onResponse', (req, reply, done) => {
    const config = req.routeOptions.config;
    // null: the chat handler counted (and logged) this request itself, with its real outcome.
    if (req.metricEndpoint !== null) {
      metrics.countRequest(config.metricRoute ?? 'unknown', config.metricMode ?? 'none', reply.statusCode, req.metricEndpoint);
      if (logInfo) logRequest(app.log, req.id, config.metricRoute, config.metricMode, req.metricEndpoint, reply.statusCode, reply.elapsedTime);
    }
    done();
  });
  // Node's server.close() waits for connections that never sent a request (LB probes, clients'
  // spare sockets) until headersTimeout; drop those at close. Busy and idle ones Fastify handles.
  app.server.on('connection', (socket: Socket) => {
    unused.add(socket);
    socket.once('close', () => unused.delete(socket));
  });
  /** Requests on Node's server whose body is still coming (dropped when the drain time is over). */
  const receiving = new Set<IncomingMessage>();
  const received = function (this: IncomingMessage): void {
    receiving.delete(this);
  };
  app.server.on('request', (req: IncomingMessage) => {
    unused.delete(req.socket);
    if (req.complete) return;
    receiving.add(req);
    req.once('end', received).once('close', received);
  });
  app.addHook('preClose', (done) => {
    closing = true;
    front?.close();
    for (const socket of unused) socket.destroy();
    done();
  });
  app.addHook('onClose', async () => {
    unsubscribe();
    routing.close();
    await pools.close();
    await limits.close();
    scale.close();
    await metricsServer?.close();
  });

  app.setErrorHandler(handleError);
  app.setNotFoundHandler(handleNotFound);

  const routes = collectRoutes(app);
  app.register(healthRoutes, { store: opts.store });
  app.register(corsRoutes);
  /** Chat calls in flight (forwardChat): the node's shutdown stops them once its drain time is over. */
  const live: InFlightCalls = { stopping: false, calls: new Set() };
  app.decorate('stopInFlight', () => {
    live.stopping = true;
    const n = live.calls.size;
    for (const stop of [...live.calls]) stop();
    // A request whose body is still coming (a stalled or slow upload) would hold the close up until Node's request
    // timeout (300 s), past the process's grace and its last usage flush: its connection goes.
    let uploads = front?.dropUploads() ?? 0;
    for (const req of receiving) {
      receiving.delete(req);
      if (req.complete) continue;
      req.socket.destroy();
      uploads++;
    }
    return n + uploads;
  });
  const chat = createChatHandler({
    live,
    store: opts.store,
    usage: scale.wrapUsage(limits.wrapUsage(opts.usage)),
    limits,
    scale,
    pools,
    router: routing.router,
    replicaCap: (target) => limits.replicaCap(target),
    routingMetrics: routing.metrics,
    metrics,
    timeouts,
    ...(opts.maxRetries !== undefined ? { maxRetries: opts.maxRetries } : {}),
    logInfo,
    onStreamError: (err: unknown, reqId: string) => app.log.warn({ reqId, code: (err as { code?: string }).code }, 'upstream stream failed mid-response'),
    halted: (target) => scale.halted(target),
  });
  app.register(inferenceRoutes, { store: opts.store, chat });
  app.register(methodNotAllowedRoutes, { table: routes }); // last: it answers for the paths registered above
  // Fastify's default JSON parser with its default poisoning options; it never looks at the request. A body it
  // refuses for a `__proto__` or `constructor.prototype` key is valid JSON: the error says which key instead.
  const defaultJsonParser = app.getDefaultJsonParser('error', 'error');
  const jsonParser: typeof defaultJsonParser = (req, text, done) =>
    defaultJsonParser(req, text, (err, value) => (err === null ? done(null, value) : done(explainJsonError(err, text as string), undefined)));
  // Same parser on Fastify's routes, behind the same nesting-depth check as the fast path.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string; // parseAs: 'string'
    if (exceedsJsonDepth(text)) done(tooDeepError(), undefined);
    else jsonParser(req, text, done);
  });
  fastPath = createChatFastPath({
    store: opts.store,
    chat,
    bodyLimit,
    log: app.log,
    closing: () => closing,
    parseJson: (body, done) => jsonParser(null as never, body, done),
  });
  return app;
}
