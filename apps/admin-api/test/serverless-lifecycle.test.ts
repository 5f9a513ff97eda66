// Issue 10, control plane, with real processes: the admin API runs as `node src/server.ts` (autoscaler
// on, fast windows), its local provisioner spawns runtime-sim replicas with a real cold start, and the
// test plays the data-plane nodes by posting load reports. Replica lifetimes are measured from the
// operating system (/proc) and compared with the GPU-time ledger.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest, type Database } from '@infer/db';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { issueAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';

const NODE_TOKEN = 'serverless-lifecycle-node-token-0123';
const SERVER = fileURLToPath(new URL('../src/server.ts', import.meta.url));
const GPUS = 2;
const PRICE_PER_GPU_HOUR = 3.6; // $0.001 per GPU-second

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
  readonly output: () => string;
  kill9(): Promise<void>;
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
}

async function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, [SERVER], {
    env: {
      ...process.env,
      ...env,
      ADMIN_PORT: '0',
      NODE_TOKEN,
      LOG_LEVEL: 'warn',
      AUTOSCALER_TICK_MS: '150',
      AUTOSCALER_STABLE_WINDOW_S: '2',
      AUTOSCALER_PANIC_WINDOW_S: '0.6',
      LOAD_REPORT_TTL_S: '1.5',
      GPU_LEDGER_HEARTBEAT_MS: '200',
      LOCAL_SIM_TTFT_MS: '0',
      LOCAL_SIM_ITL_MS: '1',
      LOCAL_COLD_START_CAP_MS: '800',
      OUTBOX_POLL_MS: '100',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`admin-api did not start: ${out.slice(-2000)}`)), 60_000);
    const onData = (b: Buffer) => {
      out = (out + b.toString()).slice(-20_000);
      const m = /admin-api listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`admin-api exited (${code}): ${out.slice(-2000)}`));
    });
  });
  child.removeAllListeners('exit');
  return {
    url,
    child,
    output: () => out,
    async kill9() {
      child.kill('SIGKILL');
      await exited(child);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited(child);
    },
  };
}

/** Processes whose parent is `ppid` (the replicas a control plane spawned), alive (not zombies). */
function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === ppid && fields[0] !== 'Z') out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** When the process started, in epoch ms (from its start tick and the system uptime, 10 ms resolution). */
function startedAtMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const startTicks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  return Date.now() - (uptime - startTicks / 100) * 1000;
}

/** Watches a control plane's replica processes: start and end of each, measured by the OS. */
function watchReplicas(server: () => Server | undefined) {
  const lives = new Map<number, { start: number; end: number | null }>();
  let maxAlive = 0;
  const timer = setInterval(() => {
    const s = server();
    if (s?.child.pid) {
      for (const pid of childrenOf(s.child.pid)) if (!lives.has(pid)) lives.set(pid, { start: startedAtMs(pid), end: null });
    }
    let n = 0;
    for (const [pid, life] of lives) {
      if (life.end !== null) continue;
      if (alive(pid)) n++;
      else life.end = Date.now();
    }
    maxAlive = Math.max(maxAlive, n);
  }, 25);
  return {
    lives,
    get maxAlive() {
      return maxAlive;
    },
    alive: () => [...lives.values()].filter((l) => l.end === null).length,
    stop: () => clearInterval(timer),
  };
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined | null | false> | T | undefined | null | false, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface GqlResult<T> {
  data?: T;
  errors?: { message: string; extensions?: { param?: string; code?: string } }[];
}

async function gql<T = any>(url: string, token: string, query: string, variables: Record<string, unknown> = {}): Promise<GqlResult<T>> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as GqlResult<T>;
}

async function trpc<T = any>(
  url: string,
  token: string,
  path: string,
  input: unknown,
  mutation = false,
): Promise<{ status: number; body: { result?: { data: T }; error?: { message: string; data: { code: string } } } }> {
  const u = new URL(`${url}/trpc/${path}`);
  const init: RequestInit = { headers: { authorization: `Bearer ${token}` } };
  if (mutation)
    Object.assign(init, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(input) });
  else u.searchParams.set('input', JSON.stringify(input));
  const res = await fetch(u, init);
  return { status: res.status, body: (await res.json()) as never };
}

async function postLoad(url: string, deploymentId: string, inFlight: number, held = 0, nodeId = 'node-a'): Promise<number> {
  const res = await fetch(`${url}/internal/v1/load`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${NODE_TOKEN}` },
    body: JSON.stringify({ nodeId, sentAt: new Date().toISOString(), deployments: [{ deploymentId, inFlight, held }], coldStarts: [] }),
  });
  await res.arrayBuffer();
  return res.status;
}

const DEPLOYMENT_FIELDS =
  'id state minReplicas maxReplicas readyReplicas desiredReplicas lastScaleReason lastError autoscaling { targetConcurrency scaleToZeroAfterSeconds scaleDownDelaySeconds } replicas { id state }';

describe.each(testBackends())('serverless lifecycle with control-plane processes (%s)', (kind) => {
  let pg: TestDatabase | undefined;
  let dataDir: string;
  let env: Record<string, string>;
  let tenantA: string;
  let tenantB: string;
  let tokenA: string;
  let tokenB: string;
  let server: Server | undefined;
  const servers: Server[] = [];
  const watch = watchReplicas(() => server);
  let deploymentId = '';

  /** The ledger straight from the database (PGlite: only while no server holds the data folder). */
  async function withDb<T>(fn: (db: Database['db']) => Promise<T>): Promise<T> {
    if (pg) return fn(pg.db);
    const d = await createDb({ dataDir: join(dataDir, 'pglite') });
    try {
      return await fn(d.db);
    } finally {
      await d.close();
    }
  }

  async function deployment(token = tokenA, tenant = tenantA) {
    const r = await gql(server!.url, token, `query($t: ID, $d: ID!) { tenant(id: $t) { deployment(id: $d) { ${DEPLOYMENT_FIELDS} } } }`, {
      t: tenant,
      d: deploymentId,
    });
    return r.data?.tenant?.deployment as
      | {
          state: string;
          readyReplicas: number;
          desiredReplicas: number;
          lastScaleReason: string | null;
          lastError: string | null;
          replicas: { id: string; state: string }[];
        }
      | undefined;
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'serverless-'));
    let db: Database;
    if (kind === 'postgres') {
      pg = await createTestDb('postgres');
      db = pg;
      env = { DATABASE_URL: pg.url!, DATA_DIR: dataDir };
    } else {
      db = await createDb({ dataDir: join(dataDir, 'pglite') });
      await migrateToLatest(db.db);
      env = { DATA_DIR: dataDir, DATABASE_URL: '' };
    }
    const a = await createTenant(db.db, { slug: 'acme', name: 'Acme' });
    const b = await createTenant(db.db, { slug: 'bravo', name: 'Bravo' });
    tenantA = a.id;
    tenantB = b.id;
    await createEntry(db.db, {
      name: 'Srv-8B',
      provider: 'acme',
      gpuCount: GPUS,
      coldStartSeconds: 1,
      concurrency: 1,
      dedicatedPricePerGpuHour: PRICE_PER_GPU_HOUR,
      offeredDedicated: true,
      offeredShared: false,
      published: true,
    });
    tokenA = (await issueAdminToken(db.db, { name: 'acme-ci', tenantId: tenantA })).secret;
    tokenB = (await issueAdminToken(db.db, { name: 'bravo-ci', tenantId: tenantB })).secret;
    if (kind === 'pglite') await db.close();
    server = await startServer(env);
    servers.push(server);
  }, 120_000);

  afterAll(async () => {
    watch.stop();
    for (const s of servers) await s.stop();
    await pg?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('deploys at min 0 (SCALED_TO_ZERO), validates the knobs naming the field, and keeps other tenants out', async () => {
    const bad = await gql(
      server!.url,
      tokenA,
      `mutation($t: ID!) { deployEndpoint(tenantId: $t, endpointName: "Srv-8B", maxReplicas: 2, autoscaling: { scaleToZeroAfterSeconds: 5 }) { id } }`,
      { t: tenantA },
    );
    expect(bad.errors?.[0]).toMatchObject({ extensions: { param: 'autoscaling.scaleToZeroAfterSeconds' } });
    const tooMany = await trpc(server!.url, tokenA, 'deployments.create', { tenantId: tenantA, entryName: 'Srv-8B', maxReplicas: 99 }, true);
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error?.message).toMatch(/maxReplicas/);

    const r = await gql(
      server!.url,
      tokenA,
      `mutation($t: ID!) { deployEndpoint(tenantId: $t, endpointName: "Srv-8B", maxReplicas: 2, autoscaling: { scaleToZeroAfterSeconds: 10, scaleDownDelaySeconds: 0 }) { ${DEPLOYMENT_FIELDS} } }`,
      { t: tenantA },
    );
    expect(r.errors).toBeUndefined();
    deploymentId = r.data.deployEndpoint.id;
    expect(r.data.deployEndpoint).toMatchObject({
      minReplicas: 0,
      maxReplicas: 2,
      desiredReplicas: 0,
      autoscaling: { targetConcurrency: 32, scaleToZeroAfterSeconds: 10, scaleDownDelaySeconds: 0 },
    });
    await waitFor('SCALED_TO_ZERO', async () => (await deployment())?.state === 'SCALED_TO_ZERO');
    expect(watch.alive()).toBe(0);

    // Tenant B can neither read, wake, scale nor see the GPU time of A's deployment (GraphQL and tRPC).
    const asB = [
      [`query($t: ID, $d: ID!) { tenant(id: $t) { deployment(id: $d) { id gpuSeconds } } }`, { t: tenantA, d: deploymentId }],
      [`query($t: ID, $d: ID!) { tenant(id: $t) { deployment(id: $d) { id gpuSeconds } } }`, { t: tenantB, d: deploymentId }],
      [`mutation($t: ID!, $d: ID!) { wakeDeployment(tenantId: $t, id: $d) { id } }`, { t: tenantA, d: deploymentId }],
      [`mutation($t: ID!, $d: ID!) { wakeDeployment(tenantId: $t, id: $d) { id } }`, { t: tenantB, d: deploymentId }],
      [`mutation($t: ID!, $d: ID!) { scaleDeployment(tenantId: $t, id: $d, minReplicas: 1, maxReplicas: 2) { id } }`, { t: tenantB, d: deploymentId }],
      [`query($t: ID) { tenant(id: $t) { usage { totals { gpuSeconds costUsd } } } }`, { t: tenantA }],
    ] as const;
    for (const [query, vars] of asB) {
      const res = await gql(server!.url, tokenB, query, vars);
      expect(res.errors?.length ?? 0, query).toBeGreaterThan(0);
    }
    for (const [path, input, mutation] of [
      ['deployments.wake', { tenantId: tenantA, deploymentId }, true],
      ['deployments.wake', { tenantId: tenantB, deploymentId }, true],
      ['deployments.scale', { tenantId: tenantB, deploymentId, minReplicas: 1, maxReplicas: 2 }, true],
      ['deployments.get', { tenantId: tenantB, deploymentId }, false],
      ['deployments.gpuSeconds', { tenantId: tenantA, deploymentId }, false],
    ] as const) {
      const res = await trpc(server!.url, tokenB, path, input, mutation);
      expect(res.body.error?.data.code, path).toMatch(/FORBIDDEN|NOT_FOUND/);
    }
    // B's own tenant with A's deployment id: not found, like deployments.get (not an empty 200).
    const own = await trpc(server!.url, tokenB, 'deployments.gpuSeconds', { tenantId: tenantB, deploymentId });
    expect(own.body.error?.data.code).toBe('NOT_FOUND');
    expect((await deployment())?.state).toBe('SCALED_TO_ZERO'); // nothing B did woke it
  }, 60_000);

  it('a wake starts a replica with a real cold start; idle past scaleToZeroAfterSeconds it drains to zero and the ledger bills its lifetime x GPUs split boot/serving/idle', async () => {
    const woke = await gql(
      server!.url,
      tokenA,
      `mutation($t: ID!, $d: ID!) { wakeDeployment(tenantId: $t, id: $d) { desiredReplicas state lastScaleReason lastScaleAt replicas { createdAt } } }`,
      { t: tenantA, d: deploymentId },
    );
    expect(woke.errors).toBeUndefined();
    expect(woke.data.wakeDeployment).toMatchObject({ desiredReplicas: 1 });
    expect(woke.data.wakeDeployment.lastScaleReason).toMatch(/^0 -> 1: wake requested/);
    // The cold start's critical path: the replica is started first (its row, its GPU time, its process), and the
    // decision's bookkeeping is written after it, not before.
    const started = woke.data.wakeDeployment.replicas as { createdAt: string }[];
    expect(started).toHaveLength(1);
    expect(Date.parse(started[0]!.createdAt)).toBeLessThanOrEqual(Date.parse(woke.data.wakeDeployment.lastScaleAt));
    const running = await waitFor('a ready replica', async () => {
      const d = await deployment();
      return d?.state === 'RUNNING' && d.readyReplicas === 1 ? d : undefined;
    });
    expect(running.replicas).toHaveLength(1);
    expect(watch.alive()).toBe(1);
    // Real requests on the replica for a while (its address from the nodes' config snapshot), reported
    // by a node as well: the replica is serving, then idle again.
    const snap = (await (await fetch(`${server!.url}/internal/v1/config/snapshot`, { headers: { authorization: `Bearer ${NODE_TOKEN}` } })).json()) as {
      deployments: { id: string; replicas: { url: string; servedModel: string }[] }[];
    };
    const replica = snap.deployments.find((x) => x.id === deploymentId)?.replicas[0];
    expect(replica).toBeDefined();
    const busyUntil = Date.now() + 1500;
    const requests: Promise<number>[] = [];
    while (Date.now() < busyUntil) {
      requests.push(
        fetch(`${replica!.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: replica!.servedModel, messages: [{ role: 'user', content: 'hi' }], max_tokens: 200 }),
        }).then(async (res) => (await res.arrayBuffer(), res.status)),
      );
      expect(await postLoad(server!.url, deploymentId, 2)).toBe(204);
      await new Promise((r) => setTimeout(r, 150));
    }
    expect(new Set(await Promise.all(requests))).toEqual(new Set([200]));
    await postLoad(server!.url, deploymentId, 0);
    const zero = await waitFor(
      'scale to zero',
      async () => {
        const d = await deployment();
        return d?.state === 'SCALED_TO_ZERO' && d.replicas.length === 0 ? d : undefined;
      },
      90_000,
    );
    expect(zero.desiredReplicas).toBe(0);
    expect(zero.lastScaleReason).toMatch(/idle for .* \(scale to zero after 10 s\)/);
    await waitFor('replica process gone', () => watch.alive() === 0);

    const lifeMs = [...watch.lives.values()].reduce((acc, l) => acc + ((l.end ?? Date.now()) - l.start), 0);
    const gpu = await trpc<{ boot: number; serving: number; idle: number; total: number }>(server!.url, tokenA, 'deployments.gpuSeconds', {
      tenantId: tenantA,
      deploymentId,
    });
    const billed = gpu.body.result!.data;
    expect(Math.abs(billed.total / GPUS - lifeMs / 1000)).toBeLessThanOrEqual(1);
    expect(billed.boot).toBeGreaterThan(0);
    expect(billed.serving).toBeGreaterThan(0);
    expect(billed.idle).toBeGreaterThan(billed.serving);
    expect(billed.boot + billed.serving + billed.idle).toBeCloseTo(billed.total, 6);

    const usage = await gql(
      server!.url,
      tokenA,
      `query($t: ID, $d: ID!) { tenant(id: $t) {
      deployment(id: $d) { gpuSeconds }
      usage { totals { gpuSeconds costUsd } byDay { gpuSeconds costUsd } byEndpoint { name mode gpuSeconds costUsd } }
    } }`,
      { t: tenantA, d: deploymentId },
    );
    expect(usage.errors).toBeUndefined();
    const t = usage.data.tenant;
    expect(t.deployment.gpuSeconds).toBeCloseTo(billed.total, 3);
    expect(t.usage.totals.gpuSeconds).toBeCloseTo(billed.total, 3);
    // Answered to the millisecond, without float noise (415.59999999999997).
    const ms = (x: number): number => Math.round(x * 1000) / 1000;
    for (const x of [t.deployment.gpuSeconds, t.usage.totals.gpuSeconds, ...t.usage.byDay.map((d: { gpuSeconds: number }) => d.gpuSeconds)])
      expect(x).toBe(ms(x));
    expect(t.usage.totals.costUsd).toBeCloseTo((billed.total / 3600) * PRICE_PER_GPU_HOUR, 6);
    expect(t.usage.byEndpoint).toEqual([expect.objectContaining({ name: 'Srv-8B', mode: 'DEDICATED' })]);
    expect(t.usage.byEndpoint[0].costUsd).toBeCloseTo(t.usage.totals.costUsd, 6);
  }, 240_000);

  it('load reports scale out (clamped to max) and back in at most halfway per step; a held request wakes from zero', async () => {
    const scaled = await gql(
      server!.url,
      tokenA,
      `mutation($t: ID!, $d: ID!) { scaleDeployment(tenantId: $t, id: $d, minReplicas: 0, maxReplicas: 4, autoscaling: { targetConcurrency: 2, scaleDownDelaySeconds: 1, scaleToZeroAfterSeconds: 10 }) { autoscaling { targetConcurrency } } }`,
      { t: tenantA, d: deploymentId },
    );
    expect(scaled.errors).toBeUndefined();
    const wake = await fetch(`${server!.url}/internal/v1/wake`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${NODE_TOKEN}` },
      body: JSON.stringify({ nodeId: 'node-a', deploymentId }),
    });
    expect(wake.status).toBe(202);
    expect(await wake.json()).toEqual({ state: 'scaling' });
    const seen = new Set<number>();
    const pump = async (inFlight: number, held: number, until: () => Promise<boolean>, what: string) => {
      await waitFor(
        what,
        async () => {
          await postLoad(server!.url, deploymentId, Math.ceil(inFlight / 2), Math.floor(held / 2), 'node-a');
          await postLoad(server!.url, deploymentId, Math.floor(inFlight / 2), Math.ceil(held / 2), 'node-b');
          const d = await deployment();
          if (d) seen.add(d.desiredReplicas);
          return until();
        },
        60_000,
      );
    };
    // 12 requests over two nodes, target 2 per replica: 6 wanted, 4 allowed.
    await pump(8, 4, async () => (await deployment())?.readyReplicas === 4, 'four ready replicas');
    expect((await deployment())?.desiredReplicas).toBe(4);
    expect(watch.maxAlive).toBeLessThanOrEqual(4);
    // Load falls to one replica's worth: 4 -> 2 -> 1, never straight down.
    await pump(2, 0, async () => (await deployment())?.desiredReplicas === 1, 'back to one replica');
    const d = await deployment();
    // The last step went 2 -> 1, so the one before went 4 -> 2 (or 3 -> 2): never straight down.
    expect(d?.lastScaleReason).toMatch(/^2 -> 1: .*down at most halfway/);
    expect([...seen].every((n) => n <= 4)).toBe(true);
    await waitFor('one replica left', async () => (await deployment())?.replicas.length === 1 && watch.alive() === 1);
    expect(watch.maxAlive).toBeLessThanOrEqual(4);
  }, 240_000);

  it('kill -9 of the control plane and a restart: the ledger closes the lost interval at its last heartbeat, no time counted twice or lost', async () => {
    // A minimum of one keeps a replica through the restart, however slow this machine is.
    const min = await gql(
      server!.url,
      tokenA,
      `mutation($t: ID!, $d: ID!) { scaleDeployment(tenantId: $t, id: $d, minReplicas: 1, maxReplicas: 4) { desiredReplicas } }`,
      { t: tenantA, d: deploymentId },
    );
    expect(min.data.scaleDeployment.desiredReplicas).toBe(1);
    await waitFor('one ready replica', async () => (await deployment())?.readyReplicas === 1 && watch.alive() === 1, 60_000);
    const before = new Set(watch.lives.keys());
    await new Promise((r) => setTimeout(r, 1000));
    const killedAt = Date.now();
    await server!.kill9();
    // The runtime goes with its control plane (its IPC channel closes).
    await waitFor('replicas of the dead control plane gone', () => watch.alive() === 0, 15_000);
    server = await startServer(env);
    servers.push(server);
    // Desired is still 1: the new leader starts a fresh replica.
    await waitFor('a new ready replica', async () => (await deployment())?.readyReplicas === 1, 60_000);
    await new Promise((r) => setTimeout(r, 1000));
    await server.stop();
    await waitFor('replicas stopped', () => watch.alive() === 0, 15_000);

    const lives = [...watch.lives.entries()].sort((a, b) => a[1].start - b[1].start);
    const rows = await withDb((db) =>
      db.selectFrom('replicaIntervals').selectAll().where('deploymentId', '=', deploymentId).orderBy('startedAt').orderBy('id').execute(),
    );
    expect(rows.every((r) => r.endedAt !== null)).toBe(true);
    const byReplica = new Map<string, typeof rows>();
    for (const r of rows) byReplica.set(r.replicaId, [...(byReplica.get(r.replicaId) ?? []), r]);
    // Per replica: intervals never overlap, and their sum is the process lifetime (within one second).
    const billedLives = [...byReplica.values()]
      .map((list) => {
        for (let i = 1; i < list.length; i++) expect(new Date(list[i]!.startedAt).getTime()).toBeGreaterThanOrEqual(new Date(list[i - 1]!.endedAt!).getTime());
        return {
          start: new Date(list[0]!.startedAt).getTime(),
          seconds: list.reduce((acc, r) => acc + (new Date(r.endedAt!).getTime() - new Date(r.startedAt).getTime()) / 1000, 0),
        };
      })
      .sort((a, b) => a.start - b.start);
    expect(billedLives).toHaveLength(lives.length);
    lives.forEach(([, life], i) => {
      expect(Math.abs(billedLives[i]!.seconds - (life.end! - life.start) / 1000), `replica ${i}`).toBeLessThanOrEqual(1);
    });
    // The replica killed with its control plane ends at a heartbeat just before the kill.
    const killed = lives.findIndex(([pid, life]) => before.has(pid) && life.end! >= killedAt);
    expect(killed).toBeGreaterThanOrEqual(0);
    server = await startServer(env); // for the tests after this one
    servers.push(server);
  }, 300_000);

  it('the node channel refuses bad calls: no credential 401, a bad body 400 naming the field, an unknown deployment 404', async () => {
    const noAuth = await fetch(`${server!.url}/internal/v1/load`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(noAuth.status).toBe(401);
    const bad = await fetch(`${server!.url}/internal/v1/load`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${NODE_TOKEN}` },
      body: JSON.stringify({ nodeId: 'n', sentAt: new Date().toISOString(), deployments: [{ deploymentId, inFlight: -1, held: 0 }], coldStarts: [] }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('deployments.0.inFlight');
    const unknown = await fetch(`${server!.url}/internal/v1/wake`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${NODE_TOKEN}` },
      body: JSON.stringify({ nodeId: 'n', deploymentId: '00000000-0000-4000-8000-000000000000' }),
    });
    expect(unknown.status).toBe(404);

    // Cold starts reported by nodes become the entry's observed p50/p95 (the entry comes from the deployment, not the node).
    const coldStarts = [1000, 1200, 1400, 1600, 3000].map((ttftMs) => ({ deploymentId, endpointId: 'not-the-entry', waitMs: ttftMs - 100, ttftMs }));
    const report = await fetch(`${server!.url}/internal/v1/load`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${NODE_TOKEN}` },
      body: JSON.stringify({ nodeId: 'n', sentAt: new Date().toISOString(), deployments: [], coldStarts }),
    });
    expect(report.status).toBe(204);
    const observed = await gql(server!.url, tokenB, `{ endpoint(name: "Srv-8B") { coldStartTtft observedColdStart { samples p50Seconds p95Seconds } } }`);
    expect(observed.errors).toBeUndefined();
    expect(observed.data.endpoint).toEqual({ coldStartTtft: '1 sec', observedColdStart: { samples: 5, p50Seconds: 1.4, p95Seconds: 3 } });
  }, 60_000);

  if (kind === 'postgres') {
    it('leader failover: with two control-plane processes only the leader runs replicas; kill -9 it and the other takes over within seconds', async () => {
      const leader = server!;
      const follower = await startServer(env);
      servers.push(follower);
      await waitFor('replica running under the leader', async () => (await deployment())?.readyReplicas === 1 && watch.alive() === 1, 60_000);
      // The follower serves the API but starts nothing.
      await new Promise((r) => setTimeout(r, 2000));
      expect(childrenOf(follower.child.pid!)).toEqual([]);
      const r = await gql(follower.url, tokenA, `query($t: ID, $d: ID!) { tenant(id: $t) { deployment(id: $d) { readyReplicas } } }`, {
        t: tenantA,
        d: deploymentId,
      });
      expect(r.data.tenant.deployment.readyReplicas).toBe(1);

      await leader.kill9();
      const killedAt = Date.now();
      server = follower;
      const took = await waitFor(
        'the follower runs the replica',
        async () => (childrenOf(follower.child.pid!).length > 0 && (await deployment())?.readyReplicas === 1 ? Date.now() - killedAt : undefined),
        30_000,
      );
      expect(took).toBeLessThan(15_000);
      expect(watch.maxAlive).toBeLessThanOrEqual(4);
    }, 180_000);
  }
});
