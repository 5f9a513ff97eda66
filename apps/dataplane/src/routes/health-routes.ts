import type { FastifyInstance } from 'fastify';
import type { ConfigStore } from '../config/config-store.ts';

export interface HealthRoutesOptions {
  readonly store: ConfigStore;
}

/** Liveness and readiness (a snapshot is loaded); metrics live on their own listener (metrics-server.ts). */
export async function healthRoutes(app: FastifyInstance, opts: HealthRoutesOptions): Promise<void> {
  app.get('/healthz', { config: { metricRoute: 'healthz', metricMode: 'none' } }, () => ({ status: 'ok' }));
  app.get('/readyz', { config: { metricRoute: 'readyz', metricMode: 'none' } }, (_req, reply) => {
    const version = opts.store.version;
    if (version === null) {
      reply.code(503).send({ status: 'not_ready', reason: 'no config snapshot loaded' });
      return;
    }
    reply.send({ status: 'ready', configVersion: version });
  });
}
