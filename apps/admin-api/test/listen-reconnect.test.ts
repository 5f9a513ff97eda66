import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createDb, migrateToLatest, type Database } from '@infer/db';
import { startPrivatePostgres, type PrivateService } from '../../../test/fault/private-services.ts';
import { buildAdminApp } from '../src/app.ts';
import { recordChange } from '../src/modules/snapshots/snapshots.service.ts';

const METRICS_TOKEN = 'listen-test-metrics-token-0123456789';

async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== false) return { value, ms: Math.round(performance.now() - start) };
    if (performance.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// Reliability 5: the LISTEN connection used to be retried exactly once, so an outage longer than one
// retry left the replica on the poll for good. The poll is set to a minute here: only NOTIFY can deliver.
describe('outbox LISTEN across a PostgreSQL outage (private PostgreSQL)', () => {
  let pg: PrivateService;
  let database: Database;
  let writer: Database;
  let app: FastifyInstance;

  beforeAll(async () => {
    pg = await startPrivatePostgres();
    database = await createDb({ databaseUrl: pg.url, poolMax: 4 });
    await migrateToLatest(database.db);
    writer = await createDb({ databaseUrl: pg.url, poolMax: 1 }); // "another replica": never signals this process
    app = await buildAdminApp({
      db: database.db,
      dbKind: 'postgres',
      pgPool: database.pool,
      nodeToken: 'listen-test-node-token-0123456789',
      publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
      pollMs: 60_000,
      metricsToken: METRICS_TOKEN,
      outboxPrune: false,
      listen: { minBackoffMs: 100, maxBackoffMs: 800, heartbeatMs: 250, timeoutMs: 1000 },
    });
    await app.configHub.ready;
  });
  afterAll(async () => {
    await app?.close();
    await writer?.close();
    await database?.close();
    await pg?.close();
  });

  const metrics = async (): Promise<string> => (await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).body;
  const ready = async (): Promise<{ status: number; body: Record<string, unknown> }> => {
    const res = await app.inject({ url: '/readyz' });
    return { status: res.statusCode, body: res.json() };
  };
  /** Commits an outbox row through the other pool and resolves how long the hub took to deliver it. */
  const deliveredAfterRemoteWrite = async (): Promise<number> => {
    const tenant = await writer.db
      .insertInto('tenants')
      .values({ slug: `t${Date.now()}`, name: 'Remote' })
      .returning('id')
      .executeTakeFirstOrThrow();
    let unsubscribe = (): void => undefined;
    const arrived = new Promise<void>((resolve) => {
      unsubscribe = app.configHub.subscribe((deltas) => deltas.some((d) => d.id === tenant.id) && resolve());
    });
    const started = performance.now();
    await writer.db.transaction().execute((trx) => recordChange(trx, 'tenant', tenant.id));
    try {
      await Promise.race([arrived, new Promise((_, reject) => setTimeout(() => reject(new Error('no NOTIFY within 5 s')), 5000))]);
    } finally {
      unsubscribe();
    }
    return Math.round(performance.now() - started);
  };

  it('reports the LISTEN state in /readyz and /metrics (token required)', async () => {
    expect(await ready()).toEqual({ status: 200, body: { status: 'ready', database: 'ok', listen: 'connected', listenReconnects: 0 } });
    expect(await metrics()).toMatch(/^listen_connected 1$/m);
    expect((await app.inject({ url: '/metrics' })).statusCode).toBe(401);
    expect((await app.inject({ url: '/metrics', headers: { authorization: 'Bearer wrong' } })).statusCode).toBe(401);
  });

  it('comes back after PostgreSQL is down for many retries, and NOTIFY delivers again', async () => {
    const before = app.configHub.externalState()!.reconnects;
    await pg.stop();
    const lost = await until('LISTEN reported lost', () => app.configHub.externalState()?.connected === false, 5000);
    const down = await ready();
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ status: 'not_ready', database: 'unreachable', listen: 'reconnecting' });
    expect(await metrics()).toMatch(/^listen_connected 0$/m);
    // Longer than the old single 1 s retry and several backoff steps of this configuration.
    await new Promise((r) => setTimeout(r, 2500));
    await pg.start();
    const back = await until('LISTEN re-established', () => app.configHub.externalState()?.connected === true, 10_000);
    expect(app.configHub.externalState()!.reconnects).toBe(before + 1);
    expect(await ready()).toMatchObject({ status: 200, body: { status: 'ready', listen: 'connected', listenReconnects: before + 1 } });
    expect(await metrics()).toMatch(new RegExp(`^listen_reconnects_total ${before + 1}$`, 'm'));
    const notifyMs = await deliveredAfterRemoteWrite();
    console.log(`LISTEN outage: lost noticed in ${lost.ms} ms, re-established ${back.ms} ms after PostgreSQL restarted, NOTIFY delivered in ${notifyMs} ms`);
  });

  it('notices a frozen server by its heartbeat and reconnects once it thaws', async () => {
    const before = app.configHub.externalState()!.reconnects;
    pg.freeze();
    try {
      const lost = await until('frozen server noticed', () => app.configHub.externalState()?.connected === false, 5000);
      console.log(`LISTEN on a frozen PostgreSQL: lost noticed in ${lost.ms} ms`);
    } finally {
      pg.thaw();
    }
    await until('LISTEN re-established after thaw', () => app.configHub.externalState()?.connected === true, 10_000);
    expect(app.configHub.externalState()!.reconnects).toBe(before + 1);
    await deliveredAfterRemoteWrite();
  });
});
