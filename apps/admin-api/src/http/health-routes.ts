import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { errorBody } from '@infer/shared';
import type { Db } from '../db.ts';
import type { ChangeHub } from '../modules/snapshots/change-hub.ts';

export interface HealthRoutesOptions {
  readonly db: Db;
  readonly hub: ChangeHub;
  /** Bearer token `/metrics` asks for; null: `/metrics` is not served (it is never public). */
  readonly metricsToken: string | null;
  /** How long the readiness query may take (default 2 s). */
  readonly dbTimeoutMs?: number;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

async function databaseAnswers(db: Db, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  try {
    return await Promise.race([
      sql`select 1`.execute(db).then(
        () => true,
        () => false,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Liveness, readiness and the control plane's own metrics. Readiness fails only when the database does
 * not answer: a replica whose LISTEN connection is down still serves every request and still delivers
 * config changes through the outbox poll, so it reports `degraded` rather than leaving the rotation.
 */
export async function healthRoutes(app: FastifyInstance, opts: HealthRoutesOptions): Promise<void> {
  const expected = opts.metricsToken ? digest(`Bearer ${opts.metricsToken}`) : null;
  const listenState = (): 'connected' | 'reconnecting' | 'none' => {
    const s = opts.hub.externalState();
    return s === null ? 'none' : s.connected ? 'connected' : 'reconnecting';
  };

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_req, reply) => {
    const database = (await databaseAnswers(opts.db, opts.dbTimeoutMs ?? 2000)) ? 'ok' : 'unreachable';
    const listen = listenState();
    const status = database !== 'ok' ? 'not_ready' : listen === 'reconnecting' ? 'degraded' : 'ready';
    return reply.code(status === 'not_ready' ? 503 : 200).send({ status, database, listen, listenReconnects: opts.hub.externalState()?.reconnects ?? 0 });
  });

  app.get('/metrics', async (req, reply) => {
    if (expected === null) return reply.code(404).send(errorBody('not_found', 'Route GET /metrics not found.'));
    if (!timingSafeEqual(digest(req.headers.authorization ?? ''), expected)) {
      return reply.code(401).header('www-authenticate', 'Bearer').send(errorBody('invalid_api_key', 'The metrics token is missing or wrong.'));
    }
    const s = opts.hub.externalState();
    const lines = [
      '# HELP listen_connected 1 while the outbox LISTEN connection to PostgreSQL is up (absent on PGlite).',
      '# TYPE listen_connected gauge',
      ...(s ? [`listen_connected ${s.connected ? 1 : 0}`] : []),
      '# HELP listen_reconnects_total Times the outbox LISTEN connection was re-established after being lost.',
      '# TYPE listen_reconnects_total counter',
      ...(s ? [`listen_reconnects_total ${s.reconnects}`] : []),
    ];
    return reply.type('text/plain; version=0.0.4; charset=utf-8').send(`${lines.join('\n')}\n`);
  });
}
