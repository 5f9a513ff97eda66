import type { FastifyInstance } from 'fastify';
import type { ConfigStore } from '../config/config-store.ts';

export interface HealthRoutesOptions {
  readonly store: ConfigStore;
}

/** Liveness, and readiness (a snapshot loaded, the node's credential not refused); metrics have their own listener (metrics-server.ts). */
export async function healthRoutes(app: FastifyInstance, opts: HealthRoutesOptions): Promise<void> {
  app.get('/healthz', { config: { metricRoute: 'healthz', metricMode: 'none' } }, () => ({ status: 'ok' }));
  app.get('/readyz', { config: { metricRoute: 'readyz', metricMode: 'none' } }, (_req, reply) => {
    const { version, refusal } = opts.store;
    // Drained by the load balancer while the control plane refuses the node; liveness stays up (nothing to restart).
    if (refusal !== null) {
      reply.code(503).send({ status: 'not_ready', reason: `${refusal}: not serving until it is accepted again` });
      return;
    }
    if (version === null) {
      reply.code(503).send({ status: 'not_ready', reason: 'no config snapshot loaded' });
      return;
    }
    reply.send({ status: 'ready', configVersion: version });
  });
}
