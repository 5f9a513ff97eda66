// A multi-node platform on this machine, all real processes: two control planes (apps/admin-api) on one
// private PostgreSQL behind a failover balancer, three data-plane nodes sharing a private Redis,
// runtime-sim. Traffic runs through every node while one control plane and one node are killed with
// SIGKILL and restarted; a key is revoked while a control plane is down; a per-key RPM limit is hit
// from every node at once. Checks: only requests in flight on the killed node fail, the revocation is
// refused by every node within a second, the limit holds fleet-wide, every 200 is billed exactly once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest, type Database } from '@infer/db';
import { addUpstream, createApiKey, createEntry, createTenant, revokeApiKey } from '@infer/admin-api';
import { freePort, startNode, waitReady, type Child } from '../bench/processes.ts';
import { startFailoverBalancer, type FailoverBalancer } from './fault/failover-balancer.ts';
import { startPrivatePostgres, startPrivateRedis, type PrivateService } from './fault/private-services.ts';

const NODE_TOKEN = 'multi-node-test-node-token-0123456789';
const MODEL = 'Model-One';
const RPM_LIMIT = 20;
const root = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, deadlineMs: number, stepMs = 10): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  for (;;) {
    const value = await fn();
    const ms = performance.now() - start;
    if (value !== undefined && value !== false) return { value, ms: Math.round(ms) };
    if (ms > deadlineMs) throw new Error(`${what}: not within ${deadlineMs} ms`);
    await sleep(stepMs);
  }
}

interface Outcome {
  readonly node: number;
  readonly status: number | 'error';
  readonly requestId: string | null;
  readonly startedAt: number;
  readonly endedAt: number;
}

async function chat(nodeUrl: string, secret: string, timeoutMs = 15_000): Promise<{ status: number; requestId: string | null }> {
  const res = await fetch(`${nodeUrl}/endpoints/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 8 }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  await res.arrayBuffer();
  return { status: res.status, requestId: res.headers.get('x-request-id') };
}

interface Node {
  child: Child;
  readonly url: string;
  readonly env: Record<string, string>;
  /** What a load balancer's health check would know: false from just before a kill until ready again. */
  routable: boolean;
}

describe('multi-node platform: 2 control planes, 3 data-plane nodes, PostgreSQL, Redis', { timeout: 180_000 }, () => {
  let dir: string;
  let pg: PrivateService;
  let redis: PrivateService;
  let database: Database;
  let sim: Child;
  let balancer: FailoverBalancer;
  let tenantId: string;
  const controlPlanes: { child: Child; port: number }[] = [];
  const nodes: Node[] = [];

  const startControlPlane = async (i: number, port: number): Promise<void> => {
    const child = startNode(`admin-api-${i}`, root('apps/admin-api/src/server.ts'), [], {
      DATABASE_URL: pg.url,
      NODE_TOKEN,
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(port),
      LOG_LEVEL: 'warn',
      DATA_DIR: join(dir, `admin-${i}`),
      // One keyring for every replica, as an operator sets it (infra/.env.example).
      SECRETS_ENCRYPTION_KEY: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    });
    await waitReady(child, `http://127.0.0.1:${port}/readyz`, 60_000);
    controlPlanes[i] = { child, port };
  };
  const startDataplane = async (i: number, env?: Record<string, string>): Promise<void> => {
    const nodeEnv = env ?? {
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      CONTROL_PLANE_URL: balancer.url,
      NODE_TOKEN,
      NODE_ID: `node-${i}`,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `infer:multi-node:${process.pid}`,
      SNAPSHOT_FILE: join(dir, `node${i}-snapshot.json`),
      USAGE_SPOOL_DIR: join(dir, `node${i}-usage`),
      USAGE_FLUSH_MS: '100',
      METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
    };
    const child = startNode(`dataplane-${i}`, root('apps/dataplane/src/server.ts'), [], nodeEnv);
    const url = `http://127.0.0.1:${nodeEnv['PORT']}`;
    await waitReady(child, `${url}/readyz`, 60_000);
    nodes[i] = { child, url, env: nodeEnv, routable: true };
  };
  const kill = async (child: Child): Promise<void> => {
    if (child.exited()) return;
    const exited = new Promise((r) => child.proc.once('exit', r));
    child.proc.kill('SIGKILL');
    await exited;
  };
  /** A fresh key, once every node accepts it (so every node's config stream is live); the 200s it took are billed. */
  const newKey = async (name: string, rpmLimit?: number): Promise<{ secret: string; keyId: string; okIds: string[] }> => {
    const created = await createApiKey(database.db, { tenantId, name, ...(rpmLimit ? { rpmLimit } : {}) });
    const okIds = await Promise.all(
      nodes.map(
        async (n) =>
          (
            await until(
              `key ${name} accepted by ${n.url}`,
              async () => {
                const r = await chat(n.url, created.secret);
                return r.status === 200 ? (r.requestId ?? '') : undefined;
              },
              15_000,
              25,
            )
          ).value,
      ),
    );
    return { secret: created.secret, keyId: created.key.id, okIds };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'infer-multi-node-'));
    [pg, redis] = await Promise.all([startPrivatePostgres(), startPrivateRedis()]);
    database = await createDb({ databaseUrl: pg.url, poolMax: 3, onIdleError: () => undefined });
    await migrateToLatest(database.db);

    const simPort = await freePort();
    // A few ms per token so that requests are really in flight when a node is killed.
    sim = startNode('runtime-sim', root('packages/runtime-sim/src/cli.ts'), [
      '--port',
      String(simPort),
      '--model',
      'org/served-model',
      '--ttft-ms',
      '20',
      '--itl-ms',
      '5',
    ]);
    const simUrl = `http://127.0.0.1:${simPort}`;
    tenantId = (await createTenant(database.db, { slug: 'multi', name: 'Multi' })).id;
    const entry = await createEntry(database.db, {
      name: MODEL,
      provider: 'org',
      offeredShared: true,
      offeredDedicated: false,
      published: true,
      contextLength: 8192,
      priceInputPerM: 1,
      priceOutputPerM: 2,
    });
    await addUpstream(database.db, { entryId: entry.id, url: simUrl, kind: 'sim', servedModel: 'org/served-model' });
    await waitReady(sim, `${simUrl}/health`);

    const ports = [await freePort(), await freePort()];
    balancer = await startFailoverBalancer(ports);
    await Promise.all(ports.map((p, i) => startControlPlane(i, p)));
    await Promise.all([0, 1, 2].map((i) => startDataplane(i)));
    // Six Node processes and two servers start here: on a loaded machine that is more than the default hook timeout.
  }, 150_000);

  afterAll(async () => {
    for (const n of nodes) if (n) await kill(n.child);
    for (const c of controlPlanes) if (c) await kill(c.child);
    if (sim) await kill(sim);
    await balancer?.close();
    await database?.close();
    await redis?.close();
    await pg?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('survives a control plane and a node killed under load: only in-flight requests on the killed node fail, revocation < 1 s everywhere, RPM holds fleet-wide, every 200 billed once', async () => {
    const load = await newKey('load');
    const revoked = await newKey('revoked during the run');
    const billedIds = [...load.okIds, ...revoked.okIds];

    // Closed-loop load: each worker sends to the next routable node in turn.
    const outcomes: Outcome[] = [];
    let running = true;
    let turn = 0;
    const workers = Array.from({ length: 6 }, async () => {
      while (running) {
        const routable = nodes.map((n, i) => (n.routable ? i : -1)).filter((i) => i >= 0);
        const node = routable[turn++ % routable.length]!;
        const startedAt = performance.now();
        try {
          const r = await chat(nodes[node]!.url, load.secret);
          outcomes.push({ node, status: r.status, requestId: r.requestId, startedAt, endedAt: performance.now() });
        } catch {
          outcomes.push({ node, status: 'error', requestId: null, startedAt, endedAt: performance.now() });
        }
      }
    });

    await sleep(500);
    // 1. One control plane dies; the nodes' streams and usage reports fail over to the other.
    await kill(controlPlanes[0]!.child);
    // Every node accepts a key created now: each one's config stream is live again (through control plane 1).
    const afterCpKill = await newKey('after control plane kill');
    billedIds.push(...afterCpKill.okIds);
    // 2. Revocation while control plane 0 is still down: refused by every node within a second.
    await revokeApiKey(database.db, { tenantId, keyId: revoked.keyId });
    const revokedIn = await Promise.all(
      nodes.map(
        async (n) =>
          (
            await until(
              `revocation on ${n.url}`,
              async () => {
                const r = await chat(n.url, revoked.secret);
                // Answered before the revocation arrived: a real request, billed like any other.
                if (r.status === 200) billedIds.push(r.requestId!);
                return r.status === 401;
              },
              1000,
              5,
            )
          ).ms,
      ),
    );
    await startControlPlane(0, controlPlanes[0]!.port);

    // 3. One data-plane node dies with requests in flight; the balancer stops routing to it first.
    const victim = 1;
    nodes[victim]!.routable = false;
    const killedAt = performance.now();
    await kill(nodes[victim]!.child);
    await sleep(300);
    await startDataplane(victim, nodes[victim]!.env);
    nodes[victim]!.routable = true;

    // 4. A per-key RPM limit hit from every node at once (the limit lives in the shared Redis).
    const limited = await newKey('rpm limited', RPM_LIMIT);
    const burst = await Promise.all(
      Array.from({ length: RPM_LIMIT * 3 }, async (_, i) => {
        const r = await chat(nodes[i % nodes.length]!.url, limited.secret);
        return r;
      }),
    );
    await sleep(500);
    running = false;
    await Promise.all(workers);

    const limitedOk = burst.filter((r) => r.status === 200);
    // newKey's own acceptance requests count against the same minute.
    expect(limited.okIds.length + limitedOk.length).toBeLessThanOrEqual(RPM_LIMIT);
    expect(limitedOk.length).toBeGreaterThan(0);
    expect(burst.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([]);
    billedIds.push(...limited.okIds, ...limitedOk.map((r) => r.requestId!));

    const failed = outcomes.filter((o) => o.status !== 200);
    const inFlightOnVictim = (o: Outcome): boolean => o.node === victim && o.startedAt < killedAt && o.endedAt >= killedAt;
    expect(failed.filter((o) => !inFlightOnVictim(o))).toEqual([]);
    const ok = outcomes.filter((o) => o.status === 200);
    expect(ok.length).toBeGreaterThan(50);
    for (const i of [0, 1, 2]) expect(ok.some((o) => o.node === i && o.startedAt > killedAt)).toBe(true);
    billedIds.push(...ok.map((o) => o.requestId!));

    // Every 200 is billed, once: request ids are unique, each has exactly one usage row.
    expect(new Set(billedIds).size).toBe(billedIds.length);
    const { ms: billedMs } = await until(
      'every answered request billed',
      async () => {
        const rows = await database.db.selectFrom('usageRecords').select('requestId').where('requestId', 'in', billedIds).execute();
        return rows.length === billedIds.length;
      },
      30_000,
      100,
    );
    const rows = await database.db
      .selectFrom('usageRecords')
      .select(['requestId', 'status'])
      .where('keyId', 'in', [load.keyId, revoked.keyId, afterCpKill.keyId, limited.keyId])
      .execute();
    // Nothing billed beyond the answered requests, save the few the killed node had in flight.
    expect(rows.filter((r) => r.status === 200).length).toBe(billedIds.length);
    expect(rows.length).toBeLessThanOrEqual(billedIds.length + failed.length);

    console.log(
      `multi-node: ${ok.length} answered 200 under load, ${failed.length} failed (all in flight on the killed node), ` +
        `revocation with a control plane down refused in ${revokedIn.map((t) => `${t} ms`).join(', ')}, ` +
        `RPM ${RPM_LIMIT}: ${limited.okIds.length + limitedOk.length} admitted of ${limited.okIds.length + burst.length} across 3 nodes, ` +
        `${billedIds.length} billed once each (all billed ${billedMs} ms after the load stopped), balancer relayed ${[...balancer.relayed.values()].join('/')} connections`,
    );
  });
});
