// Fault regression tests on real processes: a control plane (apps/admin-api/src/server.ts) on a private
// PostgreSQL, three data-plane nodes (the third behind a relay the test can cut), runtime-sim. The
// database, the control plane and the network are stopped, killed and cut; each test prints its figures.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest, type Database } from '@infer/db';
import { addUpstream, createApiKey, createEntry, createTenant, issueAdminToken, revokeApiKey } from '@infer/admin-api';
import { freePort, startNode, waitReady, type Child } from '../bench/processes.ts';
import { startCutProxy, type CutProxy } from './fault/cut-proxy.ts';
import { startPrivatePostgres, type PrivateService } from './fault/private-services.ts';

const NODE_TOKEN = 'fault-test-node-token-0123456789';
const METRICS_TOKEN = 'fault-test-metrics-token-0123456789';
const MODEL = 'Model-One';
const root = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** How long PostgreSQL stays down under load (the issue measured an 8.9 s outage). */
const OUTAGE_MS = 6000;
/** The issue's bound: a revocation made while a node was cut off is refused this soon after it reconnects. */
const REFUSED_AFTER_RECONNECT_MS = 500;
/** The config version a node's snapshot file holds (-1 while it is missing or mid-write). */
function snapshotFileVersion(path: string | undefined): number {
  try {
    return (JSON.parse(readFileSync(path ?? '', 'utf8')) as { version: number }).version;
  } catch {
    return -1;
  }
}

/** Polls `fn` until it returns something truthy; throws after `deadlineMs`. Resolves the value and the time it took. */
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

async function chat(nodeUrl: string, secret: string): Promise<{ status: number; requestId: string | null }> {
  const res = await fetch(`${nodeUrl}/endpoints/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 }),
    signal: AbortSignal.timeout(10_000),
  });
  await res.arrayBuffer();
  return { status: res.status, requestId: res.headers.get('x-request-id') };
}

interface LoadResult {
  /** Request ids of the answers the client received with 200: each must be billed exactly once. */
  readonly ok: readonly string[];
  readonly other: number;
  readonly ms: number;
}

/** Closed-loop load over the nodes: `workers` clients, each pausing `pauseMs` between requests. */
function startLoad(nodeUrls: readonly string[], secret: string, workers = 4, pauseMs = 40): { okCount(): number; stop(): Promise<LoadResult> } {
  const ok: string[] = [];
  let other = 0;
  let running = true;
  const started = performance.now();
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = w; running; i++) {
      try {
        const r = await chat(nodeUrls[i % nodeUrls.length]!, secret);
        if (r.status === 200 && r.requestId) ok.push(r.requestId);
        else other++;
      } catch {
        other++;
      }
      await sleep(pauseMs);
    }
  });
  return {
    okCount: () => ok.length,
    async stop() {
      running = false;
      await Promise.all(loops);
      return { ok, other, ms: Math.round(performance.now() - started) };
    },
  };
}

describe('faults on real processes (private PostgreSQL)', { timeout: 90_000 }, () => {
  let pg: PrivateService;
  let database: Database;
  let dir: string;
  let sim: Child;
  let controlPlane: Child;
  let adminPort: number;
  let adminUrl: string;
  let proxy: CutProxy;
  const nodes: { child: Child; url: string; env: Record<string, string> }[] = [];
  let tenantId: string;
  /** Lines 'outbox LISTEN failed (retrying)' the control plane logged (one per lost connection or failed attempt). */
  let listenFailures = 0;

  const startControlPlane = async (): Promise<void> => {
    controlPlane = startNode('admin-api', root('apps/admin-api/src/server.ts'), [], {
      DATABASE_URL: pg.url,
      NODE_TOKEN,
      METRICS_TOKEN,
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      // A minute: changes committed by this test process reach the control plane only by NOTIFY.
      OUTBOX_POLL_MS: '60000',
      OUTBOX_PRUNE_INTERVAL_S: '0',
      LOG_LEVEL: 'warn',
      DATA_DIR: join(dir, 'admin'),
    });
    controlPlane.proc.stdout?.on('data', (chunk: Buffer) => {
      listenFailures += chunk.toString('utf8').split('outbox LISTEN failed (retrying)').length - 1;
    });
    await waitReady(controlPlane, `${adminUrl}/readyz`, 30_000);
  };
  const stopChild = async (child: Child, signal: NodeJS.Signals): Promise<void> => {
    if (child.exited()) return;
    const exited = new Promise((r) => child.proc.once('exit', r));
    child.proc.kill(signal);
    await exited;
  };
  const startDataplane = async (i: number, controlPlaneUrl: string): Promise<void> => {
    const port = await freePort();
    const env = {
      HOST: '127.0.0.1',
      PORT: String(port),
      CONTROL_PLANE_URL: controlPlaneUrl,
      NODE_TOKEN,
      SNAPSHOT_FILE: join(dir, `node${i}-snapshot.json`),
      USAGE_SPOOL_DIR: join(dir, `node${i}-usage`),
      USAGE_FLUSH_MS: '100',
      METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
      ALLOWED_PRIVATE_CIDRS: '127.0.0.0/8',
    };
    const child = startNode(`dataplane-${i}`, root('apps/dataplane/src/server.ts'), [], env);
    const url = `http://127.0.0.1:${port}`;
    await waitReady(child, `${url}/readyz`, 30_000);
    nodes[i] = { child, url, env };
  };
  const restartDataplane = async (i: number): Promise<void> => {
    const node = nodes[i]!;
    node.child = startNode(`dataplane-${i}`, root('apps/dataplane/src/server.ts'), [], node.env);
    await waitReady(node.child, `${node.url}/readyz`, 30_000);
  };
  /** A fresh key, once every node accepts it; `okIds` are the billed requests that showed it. */
  const newKey = async (name: string): Promise<{ secret: string; keyId: string; okIds: string[] }> => {
    const created = await createApiKey(database.db, { tenantId, name });
    // Created by this process: it reaches the nodes through NOTIFY -> control plane -> config stream.
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
              10_000,
              25,
            )
          ).value,
      ),
    );
    return { secret: created.secret, keyId: created.key.id, okIds };
  };
  const listenState = async (): Promise<{ listen: string; reconnects: number }> => {
    const body = (await (await fetch(`${adminUrl}/readyz`)).json()) as { listen: string };
    const metrics = await (await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    return { listen: body.listen, reconnects: Number(/^listen_reconnects_total (\d+)$/m.exec(metrics)?.[1] ?? NaN) };
  };
  /** Waits until every request id is billed; resolves how long that took, and the rows the key has. */
  const billed = async (keyId: string, ids: readonly string[], deadlineMs: number): Promise<{ ms: number; rows: number; billedOk: number }> => {
    const { ms } = await until(
      'all usage billed',
      async () => {
        const row = await database.db
          .selectFrom('usageRecords')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('requestId', 'in', ids)
          .executeTakeFirstOrThrow();
        return Number(row.n) === ids.length;
      },
      deadlineMs,
      100,
    );
    const rows = await database.db.selectFrom('usageRecords').select(['requestId', 'status']).where('keyId', '=', keyId).execute();
    return { ms, rows: rows.length, billedOk: rows.filter((r) => r.status === 200).length };
  };

  /** Waits until the load has `n` more answered 200s than `from` (traffic really flows in this phase). */
  const answeredMore = async (load: { okCount(): number }, from: number, n: number, what: string): Promise<void> => {
    await until(`${n} requests answered 200 ${what}`, async () => load.okCount() - from >= n, 20_000, 20);
  };
  const usageRows = async (keyId: string): Promise<number> => {
    const row = await database.db
      .selectFrom('usageRecords')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('keyId', '=', keyId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  };
  /** Waits until usage of `keyId` is stored beyond `from` rows: the control plane ingests again. */
  const ingestingAgain = async (keyId: string, from: number, what: string): Promise<void> => {
    await until(`usage ingested again ${what}`, async () => (await usageRows(keyId).catch(() => from)) > from, 30_000, 50);
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'infer-faults-'));
    pg = await startPrivatePostgres();
    database = await createDb({ databaseUrl: pg.url, poolMax: 3, onIdleError: () => undefined });
    await migrateToLatest(database.db);

    const simPort = await freePort();
    sim = startNode('runtime-sim', root('packages/runtime-sim/src/cli.ts'), [
      '--port',
      String(simPort),
      '--host',
      '127.0.0.1',
      '--model',
      'org/served-model',
      '--ttft-ms',
      '0',
      '--itl-ms',
      '0',
    ]);
    const simUrl = `http://127.0.0.1:${simPort}`;
    const tenant = await createTenant(database.db, { slug: 'faults', name: 'Faults' });
    tenantId = tenant.id;
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

    adminPort = await freePort();
    adminUrl = `http://127.0.0.1:${adminPort}`;
    await waitReady(sim, `${simUrl}/health`);
    await startControlPlane();
    proxy = await startCutProxy(adminPort);
    await Promise.all([startDataplane(0, adminUrl), startDataplane(1, adminUrl), startDataplane(2, proxy.url)]);
  });

  afterAll(async () => {
    for (const n of nodes) if (n) await stopChild(n.child, 'SIGKILL');
    if (controlPlane) await stopChild(controlPlane, 'SIGKILL');
    if (sim) await stopChild(sim, 'SIGKILL');
    await proxy?.close();
    await database?.close();
    await pg?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // A failed step leaves the processes' own words and the private database's sessions in the report.
  afterEach(async (ctx) => {
    if (ctx.task.result?.state !== 'fail') return;
    for (const c of [controlPlane, ...nodes.map((n) => n?.child)])
      if (c) console.error(`--- ${c.name} (pid ${c.pid}${c.exited() ? ', exited' : ''}):\n${c.output()}`);
    const sessions = await database
      .pool!.query<{ pid: number; state: string | null; query: string }>(
        'select pid, state, left(query, 120) as query from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
      )
      .then(
        (r) => r.rows,
        (err: unknown) => [{ pid: 0, state: 'error', query: String(err) }],
      );
    console.error(`--- private PostgreSQL sessions:\n${sessions.map((r) => `${r.pid} ${r.state} ${r.query}`).join('\n')}`);
  });

  it('revocation reaches all three nodes within a second', async () => {
    const key = await newKey('three nodes');
    await revokeApiKey(database.db, { tenantId, keyId: key.keyId });
    const times = await Promise.all(
      nodes.map(async (n) => (await until(`revoked key refused by ${n.url}`, async () => (await chat(n.url, key.secret)).status === 401, 1000, 5)).ms),
    );
    console.log(`revocation across three nodes (commit -> 401 on each node): ${times.map((t) => `${t} ms`).join(', ')}`);
  });

  it('the control plane LISTENs again after PostgreSQL was down for several retries, and NOTIFY delivers a revocation', async () => {
    const before = await listenState();
    expect(before.listen).toBe('connected');
    const token = (await issueAdminToken(database.db, { name: 'outage', tenantId: null })).secret;
    const stoppedAt = performance.now();
    await pg.stop();
    await until('LISTEN reported lost', async () => (await listenState().catch(() => ({ listen: 'unknown' }))).listen === 'reconnecting', 10_000, 50);
    // Callers of the control plane are told it is the server, not them: 503 with Retry-After, on both transports, with
    // and without a credential (one resolved against the database first).
    const bearer = { authorization: `Bearer ${token}` };
    const graphql = (headers: Record<string, string>, query: string) =>
      fetch(`${adminUrl}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query }) });
    for (const res of [
      await graphql(bearer, '{ tenant(slug: "faults") { id } }'),
      await graphql({}, '{ endpoints(first: 5) { edges { node { name } } } }'),
      await fetch(`${adminUrl}/trpc/deployments.list?input=${encodeURIComponent(JSON.stringify({ tenantId }))}`, { headers: bearer }),
    ]) {
      const text = await res.text();
      expect([res.status, res.headers.get('retry-after')], text).toEqual([503, '2']);
      expect(text).toMatch(/the database is unreachable or busy just now/);
    }
    // Down until the control plane has failed several attempts: the old code retried exactly once, after 1 s.
    const failuresAtStop = listenFailures;
    await until('three LISTEN retries failed while PostgreSQL is down', async () => listenFailures - failuresAtStop >= 4, 30_000, 50);
    const downMs = Math.round(performance.now() - stoppedAt);
    const restarted = performance.now();
    await pg.start();
    const { ms } = await until(
      'LISTEN back',
      async () => {
        const s = await listenState();
        return s.listen === 'connected' && s.reconnects > before.reconnects;
      },
      15_000,
      50,
    );
    // Poll is a minute: only NOTIFY can bring this revocation to the control plane in time.
    const key = await newKey('after outage');
    const revokedAt = performance.now();
    await revokeApiKey(database.db, { tenantId, keyId: key.keyId });
    const refused = await until('revocation after the outage refused by node 0', async () => (await chat(nodes[0]!.url, key.secret)).status === 401, 5000, 10);
    console.log(
      `PostgreSQL down ${downMs} ms (${listenFailures - failuresAtStop} LISTEN failures logged): LISTEN re-established ${ms} ms after restart (${Math.round(performance.now() - restarted)} ms incl. the new key), revocation refused ${refused.ms} ms after commit (${Math.round(performance.now() - revokedAt)} ms)`,
    );
  });

  it('PostgreSQL restart and a multi-second outage under load lose no usage', async () => {
    const key = await newKey('pg outage load');
    const load = startLoad(
      nodes.slice(0, 2).map((n) => n.url),
      key.secret,
    );
    await answeredMore(load, 0, 20, 'before the restart');
    const rowsBeforeRestart = await usageRows(key.keyId);
    await pg.restart();
    await ingestingAgain(key.keyId, rowsBeforeRestart, 'after the restart');
    // A multi-second outage (the issue measured 8.9 s) with the nodes answering throughout.
    const okAtStop = load.okCount();
    const stoppedAt = performance.now();
    await pg.stop();
    await until(
      `${OUTAGE_MS} ms outage with requests answered`,
      async () => performance.now() - stoppedAt >= OUTAGE_MS && load.okCount() - okAtStop >= 20,
      OUTAGE_MS + 20_000,
      50,
    );
    const answeredInOutage = load.okCount() - okAtStop;
    await pg.start();
    const outageMs = Math.round(performance.now() - stoppedAt);
    const rowsAfterStart = (await until('this test reads PostgreSQL again', async () => usageRows(key.keyId).catch(() => undefined), 10_000, 50)).value;
    await ingestingAgain(key.keyId, rowsAfterStart, 'after the outage');
    const result = await load.stop();
    expect(result.ok.length).toBeGreaterThan(50);
    const answered = [...key.okIds, ...result.ok];
    const b = await billed(key.keyId, answered, 30_000);
    expect(b.billedOk).toBe(answered.length);
    expect(b.rows).toBeLessThanOrEqual(answered.length + result.other);
    console.log(
      `PostgreSQL restart + ${outageMs} ms outage under load: ${result.ok.length} answered 200 (${answeredInOutage} during the outage, ${result.other} other) in ${result.ms} ms, ${b.billedOk} billed, 0 lost, all billed ${b.ms} ms after the load stopped`,
    );
  });

  it('control-plane kill -9 under load: all usage arrives after restart, none lost, none twice', async () => {
    const key = await newKey('cp kill load');
    const load = startLoad(
      nodes.map((n) => n.url),
      key.secret,
    );
    await answeredMore(load, 0, 20, 'before the kill');
    await stopChild(controlPlane, 'SIGKILL');
    // The nodes keep serving (and spooling usage) with the control plane gone.
    await answeredMore(load, load.okCount(), 30, 'with the control plane down');
    const rowsBeforeRestart = await usageRows(key.keyId);
    const restart = performance.now();
    await startControlPlane();
    const restartMs = Math.round(performance.now() - restart);
    await ingestingAgain(key.keyId, rowsBeforeRestart, 'after the control plane restarted');
    const result = await load.stop();
    expect(result.ok.length).toBeGreaterThan(50);
    const answered = [...key.okIds, ...result.ok];
    const b = await billed(key.keyId, answered, 30_000);
    expect(b.billedOk).toBe(answered.length); // each 200 billed, and no 200 billed twice
    expect(b.rows).toBeLessThanOrEqual(answered.length + result.other);
    console.log(
      `control plane kill -9 under load: ${result.ok.length} answered 200 (${result.other} other) in ${result.ms} ms, ${b.billedOk} billed once each (0 lost, 0 duplicated), restart took ${restartMs} ms, all billed ${b.ms} ms after the load stopped`,
    );
  });

  it('a revocation made while a node was cut off is refused soon after it reconnects', async () => {
    const key = await newKey('cut off');
    const node = nodes[2]!;
    proxy.cut(); // resets the node's config stream at once; reconnects are refused until restore()
    await revokeApiKey(database.db, { tenantId, keyId: key.keyId });
    // The other nodes learn of it; the cut-off one cannot (proves the cut is real).
    await until('revocation on a connected node', async () => (await chat(nodes[0]!.url, key.secret)).status === 401, 2000);
    expect((await chat(node.url, key.secret)).status).toBe(200);
    // Cut off for real: the node has tried to reconnect and been refused at least twice.
    const refusedAtCut = proxy.refusedCount();
    await until('the cut-off node refused on reconnecting', async () => proxy.refusedCount() - refusedAtCut >= 2, 10_000, 20);
    const restoredAt = performance.now();
    proxy.restore();
    // Measured from the node's config stream request, not the restore: the node's own backoff (up to 2 s) is not the subject.
    const reconnect = await until(
      'the node reconnects its config stream',
      async () => proxy.firstRequestSince(restoredAt, 'GET /internal/v1/config/stream') ?? undefined,
      10_000,
      2,
    );
    const reconnectedAt = reconnect.value;
    let refusedAt = 0;
    await until(
      `revocation refused by the reconnected node within ${REFUSED_AFTER_RECONNECT_MS} ms of its reconnect`,
      async () => {
        const r = await chat(node.url, key.secret);
        refusedAt = performance.now();
        return r.status === 401;
      },
      Math.max(0, reconnectedAt + REFUSED_AFTER_RECONNECT_MS - performance.now()),
      5,
    );
    console.log(
      `cut-off node: revocation refused ${Math.round(refusedAt - restoredAt)} ms after the network came back, ${Math.round(refusedAt - reconnectedAt)} ms after the node's config stream reconnected`,
    );
  });

  it('a node restarted from its snapshot file while the control plane is down keeps serving', async () => {
    const live = await newKey('snapshot live');
    const gone = await newKey('snapshot revoked');
    await revokeApiKey(database.db, { tenantId, keyId: gone.keyId });
    await until('revocation reached node 1', async () => (await chat(nodes[1]!.url, gone.secret)).status === 401, 2000);
    // The snapshot file is written after the swap: wait until it holds the version node 1 serves.
    const served = ((await (await fetch(`${nodes[1]!.url}/readyz`)).json()) as { configVersion: number }).configVersion;
    await until('node 1 snapshot file at the served version', async () => snapshotFileVersion(nodes[1]!.env.SNAPSHOT_FILE) >= served, 5000, 10);
    await stopChild(controlPlane, 'SIGKILL');
    await stopChild(nodes[1]!.child, 'SIGKILL');
    const start = performance.now();
    await restartDataplane(1);
    const readyMs = Math.round(performance.now() - start);
    for (let i = 0; i < 5; i++) expect((await chat(nodes[1]!.url, live.secret)).status).toBe(200);
    expect((await chat(nodes[1]!.url, gone.secret)).status).toBe(401);
    await startControlPlane();
    // Back in the stream: a key created now reaches the restarted node too.
    await newKey('after snapshot restart');
    console.log(`node restarted from its snapshot file with the control plane down: ready in ${readyMs} ms, served 5/5, revoked key still refused`);
  });
});
