/**
 * `pnpm bench:lifecycle`: the serverless lifecycle of dedicated deployments, measured end to end on this
 * machine (issue 10). One run starts a control plane (PGlite, or PostgreSQL with DATABASE_URL; autoscaler;
 * local provisioner spawning runtime-sim processes) and a data-plane node in this process, then prints:
 *   1. cold-start overhead added by the platform: time to first byte of a request held at zero, minus the
 *      runtime's own ready time (its process start to warm, read from the process);
 *   2. the time from a load step (10 -> 200 concurrent) to enough ready replicas;
 *   3. requests failed during scale-up and during scale-down;
 *   4. GPU-seconds billed by the ledger vs replica lifetimes measured from the processes, per replica.
 */
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { createTestDb, type TestDatabase } from '@infer/db/testing';
import {
  addMember,
  buildAdminApp,
  createApiKey,
  createDefaultProvisioners,
  createEntry,
  createTenant,
  createUser,
  deployEndpoint,
  stopDeployment,
} from '@infer/admin-api';
import { buildDataplaneApp, createConfigClient, createConfigStore } from '@infer/dataplane';
import type { Principal } from '../apps/admin-api/src/modules/access/principal.ts';
import { createNodeChannel } from '../apps/dataplane/src/scale/node-channel.ts';

const NODE_TOKEN = 'bench-lifecycle-node-token-0123456789';
const TARGET = 8;
const MAX = 4;

const { values: args } = parseArgs({
  options: {
    'cold-starts': { type: 'string', default: '5' },
    'cold-start-s': { type: 'string', default: '2' },
    'base-s': { type: 'string', default: '8' },
    'peak-s': { type: 'string', default: '6' },
    'stable-window-s': { type: 'string', default: '20' },
    'gpu-count': { type: 'string', default: '2' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log('usage: pnpm bench:lifecycle [--cold-starts 5] [--cold-start-s 2] [--base-s 8] [--peak-s 6] [--stable-window-s 20] [--gpu-count 2]');
  process.exit(0);
}
const num = (name: keyof typeof args): number => {
  const n = Number(args[name]);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
  return n;
};
const COLD_STARTS = Math.round(num('cold-starts'));
const COLD_START_S = num('cold-start-s');
const BASE_S = num('base-s');
const PEAK_S = num('peak-s');
const STABLE_WINDOW_S = num('stable-window-s');
const GPU_COUNT = Math.round(num('gpu-count'));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
const pct = (xs: number[], p: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
};
const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : '-');
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '-');

// ---- the platform, in this process; replicas are real runtime-sim processes ----
const database: TestDatabase = await createTestDb(process.env['DATABASE_URL'] ? 'postgres' : 'pglite');
const { db } = database;
const tenant = await createTenant(db, { slug: 'bench', name: 'Bench' });
const user = await createUser(db, { email: 'bench@lifecycle.example', password: 'password-123' });
await addMember(db, { tenantId: tenant.id, userId: user.id, role: 'owner' });
const owner: Principal = {
  kind: 'user',
  userId: user.id,
  email: user.email,
  isPlatformAdmin: false,
  memberships: new Map([[tenant.id, 'owner']]),
  sessionId: 'bench',
};
const secret = (await createApiKey(db, { tenantId: tenant.id, name: 'bench' })).secret;

const admin = await buildAdminApp({
  db,
  dbKind: database.kind,
  nodeToken: NODE_TOKEN,
  logger: false,
  publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
  provisioners: createDefaultProvisioners({ local: { ttftMs: 0, itlMs: 15 } }),
  autoscaler: { tickMs: 250, windows: { stableWindowMs: STABLE_WINDOW_S * 1000 } },
  replicaBaseConcurrency: TARGET,
});
await admin.listen({ port: 0, host: '127.0.0.1' });
const controlPlaneUrl = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
const store = createConfigStore();
const client = createConfigClient({ url: controlPlaneUrl, nodeToken: NODE_TOKEN, store, minBackoffMs: 50, maxBackoffMs: 200 });
client.start();
const dataplane = buildDataplaneApp({
  store,
  usage: { record() {} },
  logger: false,
  // The node queues what the deployment's most replicas cannot take at once (200 clients > 4 x 8 slots).
  limits: { replicaBaseConcurrency: TARGET, queueMax: 256, queueTimeoutMs: 30_000 },
  scale: { channel: createNodeChannel({ url: controlPlaneUrl, nodeToken: NODE_TOKEN, nodeId: 'bench-node' }), tickMs: 500 },
});
await dataplane.listen({ port: 0, host: '127.0.0.1' });
const dataplaneOrigin = `http://127.0.0.1:${(dataplane.server.address() as AddressInfo).port}`;
const pool = new Pool(dataplaneOrigin, { connections: 512, pipelining: 1 });
await waitFor(() => store.view !== null, 'the first snapshot', 10_000);

/** When the node first saw a replica of a deployment ready (epoch ms). */
const firstReadySeen = new Map<string, number>();
store.onVersion((_v, view) => {
  for (const t of view.deploymentByTenantAndName.values()) {
    if (t.deploymentId !== null && t.upstreams.length > 0 && !firstReadySeen.has(t.deploymentId)) firstReadySeen.set(t.deploymentId, Date.now());
  }
});
const readyReplicas = (deploymentId: string): string[] => {
  for (const t of store.view?.deploymentByTenantAndName.values() ?? []) if (t.deploymentId === deploymentId) return t.upstreams.map((u) => u.origin);
  return [];
};

// ---- replica processes, watched from outside: pid and start time from the process, exit when it stops answering ----
interface Watched {
  replicaId: string;
  deploymentId: string;
  url: string;
  pid: number | null;
  startedAt: number | null;
  exitedAt: number | null;
}
const watched = new Map<string, Watched>();
const benchDeployments = new Set<string>();
let watching = true;
const watcher = (async () => {
  while (watching) {
    if (benchDeployments.size > 0) {
      const rows = await db
        .selectFrom('deploymentReplicas')
        .select(['id', 'deploymentId', 'url'])
        .where('deploymentId', 'in', [...benchDeployments])
        .execute();
      for (const r of rows)
        if (r.url && !watched.has(r.id))
          watched.set(r.id, { replicaId: r.id, deploymentId: r.deploymentId, url: r.url, pid: null, startedAt: null, exitedAt: null });
    }
    await Promise.all(
      [...watched.values()]
        .filter((w) => w.exitedAt === null)
        .map(async (w) => {
          try {
            const res = await fetch(`${w.url}/sim/stats`, { signal: AbortSignal.timeout(2000) });
            const s = (await res.json()) as { pid: number; processStartedAt: number };
            if (w.pid !== null && w.pid !== s.pid) throw new Error('another process took the port');
            w.pid = s.pid;
            w.startedAt = s.processStartedAt;
          } catch (err) {
            // Exited only when the port refuses connections: a busy runtime may just answer slowly.
            const code = (err as { cause?: { code?: string } }).cause?.code;
            if (w.pid !== null && code === 'ECONNREFUSED') w.exitedAt = Date.now();
          }
        }),
    );
    await sleep(100);
  }
})();

const chatPath = (name: string) => `/funccall/bench/endpoints/${name}/v1/chat/completions`;
const headers = { 'content-type': 'application/json', authorization: `Bearer ${secret}` };

// ---- 1. cold starts ----
interface ColdStart {
  ttfbMs: number;
  readyMs: number;
  overheadMs: number;
  beforeSpawnMs: number;
  afterReadyMs: number;
  toNodeMs: number;
  nodeMs: number;
}
const coldStarts: ColdStart[] = [];
// One more than measured: the first cold start of a fresh process pays for module loading and JIT warm-up.
for (let i = 0; i <= COLD_STARTS; i++) {
  const name = `Cold-${i + 1}`;
  await createEntry(db, {
    name,
    provider: 'bench',
    coldStartSeconds: COLD_START_S,
    gpuCount: GPU_COUNT,
    concurrency: 1,
    offeredDedicated: true,
    published: true,
  });
  const d = await deployEndpoint(admin.deployments, owner, {
    tenantId: tenant.id,
    entryName: name,
    minReplicas: 0,
    maxReplicas: 1,
    provisioner: 'local',
    autoscaling: { targetConcurrency: TARGET },
  });
  benchDeployments.add(d.id);
  await waitFor(() => store.snapshot()?.deployments.some((x) => x.id === d.id) === true, 'the deployment on the node', 10_000);
  const sentAt = Date.now();
  const t0 = performance.now();
  const res = await pool.request({
    path: chatPath(name),
    method: 'POST',
    headers,
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
  });
  const ttfbMs = performance.now() - t0;
  const firstByteAt = Date.now();
  await res.body.text();
  if (res.statusCode !== 200) throw new Error(`cold request ${name} answered ${res.statusCode}`);
  const origin = readyReplicas(d.id)[0]!;
  const s = (await (await fetch(`${origin}/sim/stats`)).json()) as { pid: number; processStartedAt: number; warmAt: number };
  // Registered here too: stopped right after this request, it may live too briefly for the watcher's poll to find it.
  const row = await db.selectFrom('deploymentReplicas').select('id').where('deploymentId', '=', d.id).where('url', '=', origin).executeTakeFirst();
  if (row && !watched.has(row.id))
    watched.set(row.id, { replicaId: row.id, deploymentId: d.id, url: origin, pid: s.pid, startedAt: s.processStartedAt, exitedAt: null });
  const readyMs = s.warmAt - s.processStartedAt;
  const seenAt = firstReadySeen.get(d.id) ?? Number.NaN;
  coldStarts.push({
    ttfbMs,
    readyMs,
    overheadMs: ttfbMs - readyMs,
    beforeSpawnMs: s.processStartedAt - sentAt,
    afterReadyMs: firstByteAt - s.warmAt,
    toNodeMs: seenAt - s.warmAt,
    nodeMs: firstByteAt - seenAt,
  });
  await stopDeployment(admin.deployments, owner, { tenantId: tenant.id, deploymentId: d.id });
}

// ---- 2 and 3. load step 10 -> 200 concurrent, then back to 10 ----
await createEntry(db, {
  name: 'Step',
  provider: 'bench',
  coldStartSeconds: COLD_START_S,
  gpuCount: GPU_COUNT,
  concurrency: 1,
  offeredDedicated: true,
  published: true,
});
const step = await deployEndpoint(admin.deployments, owner, {
  tenantId: tenant.id,
  entryName: 'Step',
  minReplicas: 1,
  maxReplicas: MAX,
  provisioner: 'local',
  autoscaling: { targetConcurrency: TARGET, scaleDownDelaySeconds: 0, scaleToZeroAfterSeconds: 900 },
});
benchDeployments.add(step.id);
await waitFor(() => readyReplicas(step.id).length >= 1, 'the step deployment ready', 60_000);

let phase: 'base' | 'up' | 'down' = 'base';
const failed = { base: 0, up: 0, down: 0 };
const served = { base: 0, up: 0, down: 0 };
/** Why requests failed, per phase: `<status> <code>` (or the transport error) -> count. */
const reasons = { base: new Map<string, number>(), up: new Map<string, number>(), down: new Map<string, number>() };
const note = (p: 'base' | 'up' | 'down', why: string): void => {
  failed[p]++;
  reasons[p].set(why, (reasons[p].get(why) ?? 0) + 1);
};
let workersWanted = 10;
let running = 0;
const stepBody = JSON.stringify({ messages: [{ role: 'user', content: 'step' }], max_tokens: 16 });
const worker = async (id: number): Promise<void> => {
  running++;
  try {
    while (id < workersWanted) {
      const p = phase;
      try {
        const res = await pool.request({ path: chatPath('Step'), method: 'POST', headers, body: stepBody });
        const text = await res.body.text();
        if (res.statusCode === 200) served[p]++;
        else note(p, `${res.statusCode} ${/"code":"([^"]+)"/.exec(text)?.[1] ?? ''}`);
      } catch (err) {
        note(p, err instanceof Error ? err.message.slice(0, 60) : 'error');
      }
    }
  } finally {
    running--;
  }
};
const setWorkers = (n: number): void => {
  const before = workersWanted;
  workersWanted = n;
  for (let i = before; i < n; i++) void worker(i);
};
for (let i = 0; i < 10; i++) void worker(i);
await sleep(BASE_S * 1000);
const replicasBefore = readyReplicas(step.id).length;
const enough = Math.min(MAX, Math.ceil(200 / TARGET));
phase = 'up';
const stepAt = performance.now();
setWorkers(200);
await waitFor(() => readyReplicas(step.id).length >= enough, `${enough} ready replicas`, 120_000);
const scaleUpMs = performance.now() - stepAt;
await sleep(PEAK_S * 1000);
phase = 'down';
const dropAt = performance.now();
setWorkers(10);
const settled = Math.ceil(10 / TARGET);
await waitFor(() => readyReplicas(step.id).length <= settled, `scale-down to ${settled} replicas`, (STABLE_WINDOW_S + 120) * 1000);
const scaleDownMs = performance.now() - dropAt;
await sleep(3000); // drained replicas stop after their in-flight requests: keep the load on meanwhile
setWorkers(0);
await waitFor(() => running === 0, 'the load to stop', 30_000);
await stopDeployment(admin.deployments, owner, { tenantId: tenant.id, deploymentId: step.id });

// ---- 4. GPU-seconds billed vs process lifetimes ----
await waitFor(() => [...watched.values()].every((w) => w.pid === null || w.exitedAt !== null), 'every replica process to exit', 60_000);
await waitFor(
  async () => {
    const open = await db
      .selectFrom('replicaIntervals')
      .select('id')
      .where('deploymentId', 'in', [...benchDeployments])
      .where('endedAt', 'is', null)
      .execute();
    return open.length === 0;
  },
  'the ledger to close every interval',
  60_000,
);
watching = false;
await watcher;
const intervals = await db
  .selectFrom('replicaIntervals')
  .selectAll()
  .where('deploymentId', 'in', [...benchDeployments])
  .execute();
const unmeasured = new Set(intervals.map((iv) => iv.replicaId).filter((id) => watched.get(id)?.pid == null));
const rows = [...watched.values()]
  .filter((w) => w.pid !== null)
  .map((w) => {
    const mine = intervals.filter((iv) => iv.replicaId === w.replicaId);
    const billed = mine.reduce((s, iv) => s + ((new Date(iv.endedAt!).getTime() - new Date(iv.startedAt).getTime()) / 1000) * iv.gpuCount, 0);
    const measured = ((w.exitedAt! - w.startedAt!) / 1000) * GPU_COUNT;
    return { replica: w.replicaId.slice(0, 8), pid: w.pid, measured, billed, diffPerGpu: (billed - measured) / GPU_COUNT };
  });

// ---- report ----
const warmUp = coldStarts.shift()!;
const ov = coldStarts.map((c) => c.overheadMs);
const out: string[] = [];
out.push('# Serverless lifecycle bench', '');
out.push(
  `Runtime: local provisioner (runtime-sim processes), stated Cold Start TTFT ${COLD_START_S} s, target concurrency ${TARGET}, max ${MAX} replicas, GPU count ${GPU_COUNT};`,
);
out.push(
  `autoscaler tick 250 ms, panic window 6 s, stable window ${STABLE_WINDOW_S} s (bench setting), scale-down delay 0 s; node load reports every 500 ms,`,
  'node gate queue 256 for 30 s. The control plane, the node and the load generator share this process; replicas are child processes.',
  '',
);
out.push('| measure | result | target |', '|---|---|---|');
out.push(`| cold-start overhead added by the platform, p50 (n=${ov.length}) | ${f0(pct(ov, 50))} ms | < 100 ms |`);
out.push(`| cold-start overhead, max | ${f0(Math.max(...ov))} ms | |`);
out.push(`| cold-start overhead of the first (warm-up, not counted) | ${f0(warmUp.overheadMs)} ms | |`);
out.push(`| load step 10 -> 200 concurrent: time to ${enough} ready replicas (from ${replicasBefore}) | ${f2(scaleUpMs / 1000)} s | |`);
out.push(`| requests failed during scale-up (${served.up + failed.up} sent) | ${failed.up} | 0 |`);
out.push(`| back to 10 concurrent: time to ${settled} ready replicas | ${f2(scaleDownMs / 1000)} s | |`);
out.push(`| requests failed during scale-down (${served.down + failed.down} sent) | ${failed.down} | 0 |`);
out.push(`| requests failed at base load (${served.base + failed.base} sent) | ${failed.base} | 0 |`);
const worst = Math.max(...rows.map((r) => Math.abs(r.diffPerGpu)));
out.push(`| GPU-seconds billed vs process lifetimes, worst replica (n=${rows.length}) | ${f2(worst)} s per GPU | within 1 s |`);
out.push(`| replicas billed whose process was not measured | ${unmeasured.size} | 0 |`, '');
out.push('Cold starts (ms): time to first byte = runtime ready time + overhead; overhead = before the process started + after it was warm.', '');
out.push('"after warm" splits into warm -> ready replica in the node\'s snapshot (control plane: health probe, database, config stream) and');
out.push("snapshot -> first byte (data plane: drain of the held request, forwarding, the runtime's answer).", '');
out.push('| # | TTFB | runtime ready (process start -> warm) | overhead | before spawn | after warm | warm -> node snapshot | snapshot -> first byte |');
out.push('|---|---|---|---|---|---|---|---|');
coldStarts.forEach((c, i) =>
  out.push(
    `| ${i + 1} | ${f0(c.ttfbMs)} | ${f0(c.readyMs)} | ${f0(c.overheadMs)} | ${f0(c.beforeSpawnMs)} | ${f0(c.afterReadyMs)} | ${f0(c.toNodeMs)} | ${f0(c.nodeMs)} |`,
  ),
);
out.push('', "GPU-seconds per replica (measured = process lifetime x GPU count; billed = the ledger's intervals):", '');
out.push('| replica | pid | measured GPU-s | billed GPU-s | difference per GPU (s) |', '|---|---|---|---|---|');
for (const r of rows) out.push(`| ${r.replica} | ${r.pid} | ${f2(r.measured)} | ${f2(r.billed)} | ${f2(r.diffPerGpu)} |`);
for (const p of ['base', 'up', 'down'] as const) {
  if (reasons[p].size > 0) out.push('', `Failures (${p}): ${[...reasons[p]].map(([k, n]) => `${k} x${n}`).join(', ')}`);
}
console.log(out.join('\n'));

await pool.close();
await dataplane.close();
await client.close();
await admin.close();
await database.close();
process.exit(0);
