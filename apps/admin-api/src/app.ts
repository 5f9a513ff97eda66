import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import fastifyStatic from '@fastify/static';
import { fastifyTRPCPlugin, type FastifyTRPCPluginOptions } from '@trpc/server/adapters/fastify';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type pg from 'pg';
import type { Db, DbKind } from './db.ts';
import {
  graphqlErrorBody,
  httpStatusCode,
  sendFrameworkError,
  sendHttpError,
  sendMethodNotAllowed,
  sendNotFound,
  trpcResponseMeta,
  writeClientError,
} from './error-mapping.ts';
import type { GraphQLLimits } from './graphql/context.ts';
import { createGraphQLServer } from './graphql/yoga.ts';
import { healthRoutes } from './http/health-routes.ts';
import { requireNodeCredential } from './http/node-auth.ts';
import { securityHeaders } from './http/security-headers.ts';
import { createLoginThrottle, type LoginThrottleOptions } from './modules/auth/login-throttle.ts';
import { createPrincipalRateLimit } from './modules/auth/principal-rate-limit.ts';
import { startSessionSweeper, type SessionSweeper } from './modules/auth/sessions.ts';
import { createRequestDb } from './request-db.ts';
import { startAutoscaler, type Autoscaler, type AutoscalerOptions } from './modules/deployments/autoscaler/autoscaler.ts';
import { createAdvisoryLeader, createSoleLeader } from './modules/deployments/autoscaler/leader-election.ts';
import { createDefaultProvisioners, createDeploymentsContext, type DeploymentsContext } from './modules/deployments/deployments-context.ts';
import { nodeChannelRoutes } from './modules/deployments/node-channel.routes.ts';
import type { ReconcilerOptions } from './modules/deployments/reconciler.ts';
import type { Provisioners } from './modules/deployments/provisioners/provisioner.ts';
import { createChangeHub, type ChangeHub } from './modules/snapshots/change-hub.ts';
import { startOutboxPruner, type OutboxPruner, type OutboxPrunerOptions } from './modules/snapshots/outbox-prune.ts';
import { postgresWakeSource, type PostgresWakeSourceOptions } from './modules/snapshots/pg-listen.ts';
import { snapshotRoutes } from './modules/snapshots/snapshots.routes.ts';
import { usageRoutes } from './modules/usage/usage.routes.ts';
import { normaliseOrigins } from './modules/auth/origin.ts';
import { createContextFactory, type PublicUrls } from './trpc/context.ts';
import { appRouter, type AppRouter } from './trpc/root.ts';

export interface AdminAppOptions {
  readonly db: Db;
  readonly dbKind: DbKind;
  /** Bootstrap credential of data-plane nodes (config feed, usage ingest), accepted beside per-node `infn_…` credentials; unset: per-node credentials only. */
  readonly nodeToken?: string | undefined;
  readonly publicUrls: PublicUrls;
  /** A built web console to serve at `/` (SPA fallback to index.html). */
  readonly webRoot?: string;
  readonly logger?: boolean | object;
  /** On PostgreSQL: the pool to take a LISTEN connection from (other replicas' changes arrive at once). */
  readonly pgPool?: pg.Pool;
  /** Outbox poll interval, the fallback wake-up (default 250 ms). */
  readonly pollMs?: number;
  /** Bearer token for `GET /metrics` (LISTEN state); without one `/metrics` is not served. */
  readonly metricsToken?: string;
  /** Retry and heartbeat timing of the LISTEN connection (tests shorten them). */
  readonly listen?: PostgresWakeSourceOptions;
  /** SSE keep-alive comment interval (default 15 s). */
  readonly pingMs?: number;
  /** Dedicated-deployment provisioners (default: local runtime-sim processes and external URLs). */
  readonly provisioners?: Provisioners;
  /** Let tenants register external runtimes on loopback/private addresses (default false). */
  readonly allowPrivateExternalUrls?: boolean;
  /** Operator allow-list: non-public CIDRs tenants' external runtimes may use (env ALLOWED_PRIVATE_CIDRS). */
  readonly allowedPrivateCidrs?: readonly string[];
  /**
   * Console origins served elsewhere: trusted (with this server's own origin) for cookie-authenticated
   * calls, and the only origins that get credentialed CORS on /graphql.
   */
  readonly consoleOrigins?: readonly string[];
  /**
   * Honour X-Forwarded-For/Host/Proto only from these proxies (Fastify `trustProxy`: true, a hop
   * count, or addresses/CIDRs); default false: the socket's own address, Host and protocol.
   */
  readonly trustProxy?: boolean | number | readonly string[];
  /** `statement_timeout` of the pool tRPC and GraphQL query through (PostgreSQL; default 5000 ms, 0: none). */
  readonly apiStatementTimeoutMs?: number;
  /** Work budget per principal per minute on tRPC and GraphQL (default 1200 points; see PrincipalRateLimit). */
  readonly principalPointsPerMinute?: number;
  /** Login attempt limits (default 5 per account and IP, 20 per account, 50 per IP in 15 minutes). */
  readonly loginLimits?: LoginThrottleOptions;
  /** How often expired sessions and finished login-throttle windows are deleted (default 10 minutes). */
  readonly sessionSweepMs?: number;
  /** GraphQL depth and cost budget per operation (default depth 10, cost 5000). */
  readonly graphqlLimits?: Partial<GraphQLLimits>;
  /**
   * Config-outbox pruning (default: every 10 minutes, keep the newest 10,000 rows and none older than
   * 24 hours, the newest row always); `false` turns it off.
   */
  readonly outboxPrune?: Pick<OutboxPrunerOptions, 'intervalMs' | 'retainRows' | 'retainHours'> | false;
  /**
   * Serverless autoscaler (leader-elected through a PostgreSQL advisory lock; PGlite: this process).
   * Absent: off (replicas follow the desired count that API calls and wake requests set).
   */
  readonly autoscaler?: AutoscalerOptions & { readonly leaderRetryMs?: number };
  /** Replica lifecycle knobs: start deadline and retries, drain grace and deadline. */
  readonly replicaLifecycle?: Omit<ReconcilerOptions, 'isLeader' | 'reportedInFlight'>;
  /** The data plane's REPLICA_BASE_CONCURRENCY (default 32): the default target concurrency per replica. */
  readonly replicaBaseConcurrency?: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The config change hub (tests and provisioners may wake it). */
    configHub: ChangeHub;
    /** Dedicated deployments: the service's context (provisioners, reconciler). */
    deployments: DeploymentsContext;
    /** The serverless autoscaler (undefined when off). */
    autoscaler: Autoscaler | undefined;
    /** The periodic config-outbox pruner (undefined when turned off). */
    outboxPruner: OutboxPruner | undefined;
    /** Deletes expired sessions and finished login-throttle windows periodically (tests call `sweepNow`). */
    sessionSweeper: SessionSweeper;
  }
}

/** True for the content type Fastify's JSON parser reads (`application/json`, any parameters). */
const isJsonMediaType = (contentType: string | undefined): boolean => contentType?.split(';')[0]?.trim().toLowerCase() === 'application/json';

/** A parsed JSON body whatwg-node passes on as it is: an object with at least one key. */
const hasKeys = (body: unknown): boolean => typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length > 0;

const API_PREFIXES = ['/internal/', '/graphql', '/trpc', '/healthz', '/readyz', '/metrics', '/api/'];

/** The built console's files (Vite's `assets/`): a missing one is a 404, never the SPA page a script tag would choke on. */
const ASSET_PREFIX = '/assets/';

/** The methods tRPC serves: GET for queries, POST for mutations (HEAD as GET). */
const TRPC_METHODS = ['GET', 'HEAD', 'POST'] as const;

/** Builds the control plane (never listens): config feed, usage ingest, GraphQL, tRPC, console. */
export async function buildAdminApp(opts: AdminAppOptions): Promise<FastifyInstance> {
  const serverOptions: FastifyServerOptions = {
    logger: opts.logger ?? false,
    routerOptions: { maxParamLength: 5000 }, // tRPC batches put procedure lists in the path
    forceCloseConnections: 'idle',
    // What Fastify's router or Node's HTTP parser refuse (bad percent-encoding, headers too large) answer in the API's shape.
    frameworkErrors: sendFrameworkError,
    clientErrorHandler: writeClientError,
    // Forwarded headers are believed only from a configured proxy (req.ip, req.host, req.protocol).
    trustProxy:
      typeof opts.trustProxy === 'number'
        ? (_address: string, hop: number) => hop < (opts.trustProxy as number)
        : Array.isArray(opts.trustProxy)
          ? [...opts.trustProxy]
          : ((opts.trustProxy as boolean | undefined) ?? false),
  };
  const app = Fastify(serverOptions);
  const { db } = opts;

  const hub = createChangeHub(db, {
    pollMs: opts.pollMs,
    external:
      opts.dbKind === 'postgres' && opts.pgPool
        ? postgresWakeSource(opts.pgPool, {
            ...opts.listen,
            onError: (err) => app.log.warn({ err }, 'outbox LISTEN failed (retrying)'),
            onStateChange: (s) =>
              s.connected ? app.log.info({ reconnects: s.reconnects }, 'outbox LISTEN connected') : app.log.warn('outbox LISTEN connection lost'),
          })
        : undefined,
    onError: (err) => app.log.warn({ err }, 'outbox poll failed'),
  });
  app.decorate('configHub', hub);
  app.addHook('onClose', async () => hub.close());

  const pruner =
    opts.outboxPrune === false
      ? undefined
      : startOutboxPruner(db, {
          ...opts.outboxPrune,
          onPruned: (r) => {
            if (r.deleted > 0) app.log.info({ deleted: r.deleted, oldestSeq: r.oldestSeq, version: r.newestSeq }, 'config outbox pruned');
          },
          onError: (err) => app.log.warn({ err }, 'config outbox prune failed'),
        });
  app.decorate('outboxPruner', pruner);
  app.addHook('onClose', async () => pruner?.stop());

  // With several control-plane replicas on PostgreSQL only the leader runs replicas and decides.
  const election = !opts.autoscaler
    ? undefined
    : opts.dbKind === 'postgres' && opts.pgPool
      ? createAdvisoryLeader({ pool: opts.pgPool, retryMs: opts.autoscaler.leaderRetryMs, log: app.log })
      : createSoleLeader();
  const deployments = createDeploymentsContext({
    db,
    provisioners: opts.provisioners ?? createDefaultProvisioners(),
    log: app.log,
    allowPrivateExternalUrls: opts.allowPrivateExternalUrls,
    allowedPrivateCidrs: opts.allowedPrivateCidrs,
    replicaBaseConcurrency: opts.replicaBaseConcurrency,
    reconciler: { ...opts.replicaLifecycle, ...(election ? { isLeader: () => election.isLeader() } : {}) },
  });
  app.decorate('deployments', deployments);
  const autoscaler = election ? startAutoscaler(deployments, election, opts.autoscaler) : undefined;
  app.decorate('autoscaler', autoscaler);
  // Local replicas end with this process (a restart's reconcile starts them again); Kubernetes pods and external URLs
  // are handed over as they are, and the next leader adopts them.
  app.addHook('onClose', async () => {
    await autoscaler?.close();
    await deployments.reconciler.close();
  });

  app.setErrorHandler((err: unknown, request, reply) => sendHttpError(err, request, reply));

  const webRoot = opts.webRoot && existsSync(resolve(opts.webRoot, 'index.html')) ? resolve(opts.webRoot) : undefined;
  const headers = securityHeaders({
    webRoot,
    connectOrigins: [opts.publicUrls.dataplaneUrl, opts.publicUrls.sharedBaseUrl].map((u) => new URL(u).origin),
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    for (const [name, value] of Object.entries(headers)) if (!reply.hasHeader(name)) reply.header(name, value);
    return payload;
  });

  // What API callers share: one database pool with a statement timeout, one login throttle, one work budget per principal.
  const requestDb = createRequestDb({ db, kind: opts.dbKind, pool: opts.pgPool, timeoutMs: opts.apiStatementTimeoutMs ?? 5000 });
  app.addHook('onClose', async () => requestDb.close());
  const loginThrottle = createLoginThrottle(db, opts.loginLimits);
  const rateLimit = createPrincipalRateLimit({ pointsPerMinute: opts.principalPointsPerMinute });
  const consoleOrigins = normaliseOrigins(opts.consoleOrigins ?? []);
  const sweeper = startSessionSweeper(db, {
    intervalMs: opts.sessionSweepMs ?? 10 * 60 * 1000,
    also: () => loginThrottle.sweep(),
    onSwept: (deleted) => {
      if (deleted > 0) app.log.info({ deleted }, 'expired sessions deleted');
    },
    onError: (err) => app.log.warn({ err }, 'session sweep failed'),
  });
  app.decorate('sessionSweeper', sweeper);
  app.addHook('onClose', async () => sweeper.stop());
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0] ?? '/';
    const isApi = API_PREFIXES.some((p) => path === p.replace(/\/$/, '') || path.startsWith(p));
    if (webRoot && (request.method === 'GET' || request.method === 'HEAD') && !isApi && !path.startsWith(ASSET_PREFIX)) {
      return reply.type('text/html; charset=utf-8').sendFile('index.html');
    }
    return sendNotFound(request, reply);
  });

  await app.register(healthRoutes, { db, hub, metricsToken: opts.metricsToken ?? null });

  await app.register(
    async (internal) => {
      internal.addHook('onRequest', requireNodeCredential({ db, bootstrapToken: opts.nodeToken }));
      await internal.register(snapshotRoutes, { db, hub, pingMs: opts.pingMs });
      await internal.register(usageRoutes, { db });
      await internal.register(nodeChannelRoutes, { deployments });
    },
    { prefix: '/internal/v1' },
  );

  const yoga = createGraphQLServer({
    db: requestDb.db,
    rateLimit,
    publicUrls: opts.publicUrls,
    deployments,
    limits: opts.graphqlLimits,
    allowedOrigins: consoleOrigins,
    onUnexpectedError: (err) => app.log.error({ err }, 'GraphQL operation failed'),
  });
  app.route({
    url: '/graphql',
    method: ['GET', 'POST', 'OPTIONS'],
    handler: async (req, reply) => {
      // Fastify has parsed a JSON body already. whatwg-node hands Yoga a parsed body only when it has keys: for
      // `{}`, `[]`, `null` or a bare string or number it re-reads the consumed stream (or takes the string as the
      // text) and Yoga sees invalid JSON. The JSON text again lets Yoga answer what the body says (only then: a body
      // with keys goes on parsed, not serialised and parsed once more).
      if (req.method === 'POST' && req.body !== undefined && isJsonMediaType(req.headers['content-type']) && !hasKeys(req.body)) {
        req.body = JSON.stringify(req.body);
      }
      const response = await yoga.handleNodeRequestAndResponse(req, reply, { req, reply });
      response.headers.forEach((value, key) => void reply.header(key, value));
      const type = response.headers.get('content-type') ?? '';
      if (response.status >= 400 && response.body === null) {
        // Yoga answers some refusals (e.g. 406 for an Accept it cannot serve) with no body.
        return reply
          .code(response.status)
          .type('application/json; charset=utf-8')
          .send(graphqlErrorBody(httpStatusCode(response.status), `GraphQL request refused (HTTP ${response.status}).`));
      }
      if (response.status === 200 && /^application\/(graphql-response\+)?json/.test(type)) {
        // A result with errors and no `data` never executed (syntax, validation, variables): a 400, whatever the Accept.
        const text = await response.text();
        const result = JSON.parse(text) as { data?: unknown; errors?: unknown };
        return reply.code(!('data' in result) && Array.isArray(result.errors) ? 400 : 200).send(text);
      }
      reply.status(response.status);
      return reply.send(response.body);
    },
  });
  app.route({
    url: '/graphql',
    method: ['PUT', 'PATCH', 'DELETE'],
    handler: async (_req, reply) =>
      reply.code(405).header('allow', 'GET, POST, OPTIONS').send(graphqlErrorBody('method_not_allowed', 'GraphQL takes GET (queries) or POST.')),
  });

  // tRPC's own refusals (e.g. 415 for a content type it cannot read) carry a JSON body without saying so.
  app.addHook('onSend', async (request, reply, payload) => {
    // The adapter sends a fetch Response whose headers Fastify copies after this hook: fix them on the Response.
    if (request.url.startsWith('/trpc/') && payload instanceof Response && payload.status >= 400) {
      const type = payload.headers.get('content-type');
      if (type === null || type.startsWith('text/plain')) {
        const headers = new Headers(payload.headers);
        headers.set('content-type', 'application/json; charset=utf-8');
        return new Response(payload.body, { status: payload.status, statusText: payload.statusText, headers });
      }
    }
    return payload;
  });

  await app.register(async (trpc) => {
    // tRPC's adapter takes every method and answers the others (OPTIONS, DELETE, ...) with a 415 about the content type.
    trpc.addHook('onRequest', async (request, reply) => {
      if (!(TRPC_METHODS as readonly string[]).includes(request.method)) return sendMethodNotAllowed(request, reply, TRPC_METHODS);
    });
    await trpc.register(fastifyTRPCPlugin, {
      prefix: '/trpc',
      trpcOptions: {
        router: appRouter,
        createContext: createContextFactory({ db: requestDb.db, publicUrls: opts.publicUrls, deployments, consoleOrigins, loginThrottle, rateLimit }),
        responseMeta: trpcResponseMeta,
        onError: ({ error, path }) => {
          if (error.code === 'INTERNAL_SERVER_ERROR') app.log.error({ err: error.cause ?? error, path }, 'tRPC procedure failed');
        },
      },
    } satisfies FastifyTRPCPluginOptions<AppRouter>);
  });

  if (webRoot) {
    await app.register(fastifyStatic, { root: webRoot, prefix: '/', wildcard: false, index: 'index.html' });
  }

  return app;
}
