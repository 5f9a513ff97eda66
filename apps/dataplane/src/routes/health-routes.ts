import type { FastifyInstance } from 'fastify';
import type { ConfigStore } from '../config/config-store.ts';
import type { DataplaneMetrics } from '../metrics.ts';

export interface HealthRoutesOptions {
  readonly store: ConfigStore;
  readonly metrics: DataplaneMetrics;
}

/** Liveness, readiness (a snapshot is loaded) and Prometheus metrics. */
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
  app.get('/metrics', { config: { metricRoute: 'metrics', metricMode: 'none' } }, (_req, reply) => {
    reply.type('text/plain; version=0.0.4; charset=utf-8').send(opts.metrics.render());
  });
}
