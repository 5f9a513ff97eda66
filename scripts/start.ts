// `pnpm start`: the whole platform on one machine with embedded defaults (PGlite, simulated runtimes).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDb, DataDirInUseError, migrateToLatest } from '@infer/db';
import { buildSnapshot, createApiKey, getTenantBySlug, getUserByEmail, seedDemo, setPassword } from '@infer/admin-api';
import { configSnapshotSchema, dedicatedModelName, type ConfigSnapshot } from '@infer/shared';
import { releasePidLock, takePidLock } from '@infer/shared/pid-lock';
import { buildDataplane } from '../apps/dataplane/build.ts';
import { DATAPLANE_NODE_ENV, DATAPLANE_NODE_FLAGS } from '../apps/dataplane/src/node-flags.ts';
import { loadStartEnv } from './start-env.ts';
import { deploymentsSettled, freePort, parseEnvFile, planSims, portMessage, portProblem, waitForHttp, writeFileAtomic } from './start-lib.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Ends `pnpm start` with one line, before anything was started (no stack trace: this is the caller's setup). */
function refuse(line: string): never {
  console.error(line);
  process.exit(1);
}

let env: ReturnType<typeof loadStartEnv>;
try {
  env = loadStartEnv();
} catch (err) {
  // Each bad variable named, on one line.
  refuse(`[start] ${(err as Error).message.replace(/:\n\s*/, ': ').replace(/\n\s*/g, '; ')}`);
}

// Every port is checked before anything is touched: a second `pnpm start` must not open the first one's
// database, rewrite its demo.env or print a banner whose readiness checks answered from the other instance.
for (const [port, variable] of [
  [env.ADMIN_PORT, 'ADMIN_PORT'],
  [env.PORT, 'PORT'],
  ...(env.METRICS_PORT === 0 ? [] : ([[env.METRICS_PORT, 'METRICS_PORT']] as const)),
] as const) {
  const problem = await portProblem(env.HOST, port);
  if (problem !== null) refuse(portMessage(port, env.HOST, problem, variable));
}
// A free one by default (a fixed port would collide with a second instance's), chosen here so the banner can print it.
const metricsPort = env.METRICS_PORT === 0 ? await freePort(env.HOST) : env.METRICS_PORT;
// The data plane runs from its compiled bundle, as in production (apps/dataplane/build.ts; about 0.3 s).
try {
  await buildDataplane();
} catch (err) {
  refuse(`[start] could not bundle the data plane (apps/dataplane/build.ts): ${(err as Error).message.split('\n')[0]}`);
}
const dataDir = resolve(root, env.DATA_DIR);
mkdirSync(dataDir, { recursive: true, mode: 0o700 });
// A DATA_DIR made earlier under a loose umask holds the database, tokens and snapshot: the owner's alone.
chmodSync(dataDir, 0o700);
// One `pnpm start` per DATA_DIR, checked before its database is opened (the embedded PostgreSQL takes one process).
const lockFile = join(dataDir, 'start.lock');
const lockHolder = takePidLock(lockFile);
if (lockHolder !== null) {
  refuse(`[start] ${dataDir} is in use by another pnpm start (process ${lockHolder}): stop it, or set DATA_DIR to another folder`);
}
process.on('exit', () => releasePidLock(lockFile));

const children: ChildProcess[] = [];
/** The data plane, stopped first (see stopAll). */
let dataplane: ChildProcess | null = null;
let stopping = false;
// The children run in process groups of their own (detached), so a terminal's Ctrl-C (SIGINT to the whole
// foreground group) reaches only this process, which stops them in order and exits 0: no child dies of the
// SIGINT first and makes a clean stop look like a crash (pnpm's "ELIFECYCLE Command failed").
//
// The order: the data plane first, which stops taking requests, lets the ones in flight finish and sends their usage
// to the control plane; then the control plane and the runtimes. Stopped together, the runtimes cut the streams in
// flight and the usage records stayed in the data plane's spool until the next start. A second Ctrl-C stops
// everything at once.
/** How long the data plane may take to finish the requests in flight before it is killed. */
const DATAPLANE_DRAIN_MS = 10_000;
/** How long the control plane and the runtimes may take after SIGTERM. */
const REST_STOP_MS = 5000;

const running = (c: ChildProcess): boolean => c.exitCode === null && c.signalCode === null;

/** SIGTERM to `group`; SIGKILL to what is left of it after `ms`. Resolves once all of it has exited. */
async function stopGroup(group: readonly ChildProcess[], ms: number): Promise<void> {
  const live = group.filter(running);
  for (const c of live) c.kill('SIGTERM');
  const kill = setTimeout(() => {
    for (const c of live) if (running(c)) c.kill('SIGKILL');
  }, ms);
  await Promise.all(live.map((c) => new Promise((r) => c.once('exit', r))));
  clearTimeout(kill);
}

function stopAll(code: number): void {
  if (stopping) {
    // Asked again (a second Ctrl-C): at once.
    for (const c of children) if (running(c)) c.kill('SIGKILL');
    process.exit(code);
  }
  stopping = true;
  const first = dataplane === null ? [] : [dataplane];
  void stopGroup(first, DATAPLANE_DRAIN_MS)
    .then(() =>
      stopGroup(
        children.filter((c) => c !== dataplane),
        REST_STOP_MS,
      ),
    )
    .then(() => process.exit(code));
}
process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));
process.on('SIGHUP', () => stopAll(0)); // the terminal closed: detached children would not see it
// Whoever started this went without a signal reaching it (the `node` package's wrapper does not pass SIGTERM on, an
// IDE's stop button, `timeout`): stop as on Ctrl-C rather than leave the platform running on its ports.
const startedBy = process.ppid;
setInterval(() => {
  if (process.ppid !== startedBy) stopAll(0);
}, 500).unref();

function launch(name: string, script: string, args: string[], extraEnv: Record<string, string>, nodeArgs: readonly string[] = []): ChildProcess {
  const child = spawn(process.execPath, [...nodeArgs, join(root, script), ...args], {
    cwd: root,
    env: { ...process.env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const prefix = (line: string) => `[${name}] ${line}`;
  const pipe = (s: NodeJS.ReadableStream, out: NodeJS.WriteStream) => {
    let buf = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        if (env.LOG_LEVEL !== 'silent') out.write(prefix(buf.slice(0, i)) + '\n');
        buf = buf.slice(i + 1);
      }
    });
  };
  pipe(child.stdout!, process.stdout);
  pipe(child.stderr!, process.stderr);
  child.on('exit', (code, signal) => {
    if (!stopping) {
      console.error(`[start] ${name} exited (${signal ?? code}); stopping everything`);
      stopAll(1);
    }
  });
  children.push(child);
  return child;
}

function readOrCreateNodeToken(): string {
  const file = join(dataDir, 'node-token');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const token = randomBytes(32).toString('base64url');
  writeFileSync(file, token + '\n', { mode: 0o600 });
  return token;
}

const adminUrl = `http://${env.HOST}:${env.ADMIN_PORT}`;
const dataplaneUrl = `http://${env.HOST}:${env.PORT}`;
const publicAdmin = `http://${env.PUBLIC_HOST}:${env.ADMIN_PORT}`;
const publicDataplane = `http://${env.PUBLIC_HOST}:${env.PORT}`;
const nodeToken = readOrCreateNodeToken();
const demoFile = join(dataDir, 'demo.env');
// demo.env exists only once everything answers: a script that waits for it can call the API at once. The last
// run's values are kept aside meanwhile (and read back if this start fails before writing a new one).
const lastDemoFile = join(dataDir, 'demo.env.last');
const freshDatabase = !env.DATABASE_URL && !existsSync(join(dataDir, 'pglite'));

// Migrate and seed before the control plane opens the database (PGlite allows one process at a time).
const database = await createDb(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL } : { dataDir: join(dataDir, 'pglite') }).catch((err: unknown) => {
  // admin:create (or a control plane started by hand) has the embedded database open.
  if (err instanceof DataDirInUseError) refuse(`[start] ${err.dataDir} is open in process ${err.holderPid}: stop it, or set DATA_DIR to another folder`);
  throw err;
});
let demo: Record<string, string>;
let sims: ReturnType<typeof planSims>;
let seededNow: boolean;
try {
  await migrateToLatest(database.db);
  const seeded = await seedDemo(database.db, { simBasePort: env.SIM_BASE_PORT });
  seededNow = seeded !== null;
  const previousFile = [demoFile, lastDemoFile].find((f) => existsSync(f));
  const previous = previousFile ? parseEnvFile(readFileSync(previousFile, 'utf8')) : {};
  if (seeded) {
    demo = {
      tenant: seeded.tenantSlug,
      dedicatedName: seeded.dedicatedName,
      SHARED_MODEL: seeded.sharedModel,
      DEDICATED_MODEL: seeded.dedicatedModel,
      INFERENCE_API_KEY: seeded.apiKey,
      ADMIN_EMAIL: seeded.adminEmail,
      ADMIN_PASSWORD: seeded.adminPassword,
    };
  } else if (previous['INFERENCE_API_KEY'] && previous['DEMO_TENANT'] && previous['DEDICATED_NAME']) {
    demo = {
      tenant: previous['DEMO_TENANT'],
      dedicatedName: previous['DEDICATED_NAME'],
      SHARED_MODEL: previous['SHARED_MODEL'] ?? '',
      DEDICATED_MODEL: previous['DEDICATED_MODEL'] ?? '',
      INFERENCE_API_KEY: previous['INFERENCE_API_KEY'],
      ADMIN_EMAIL: previous['ADMIN_EMAIL'] ?? '',
      ADMIN_PASSWORD: previous['ADMIN_PASSWORD'] ?? '',
    };
  } else {
    // The database was seeded but demo.env is gone: the old secrets cannot be recovered (only hashes are
    // stored), so issue a new demo key and a new demo admin password.
    const tenant = await getTenantBySlug(database.db, 'demo');
    const admin = await getUserByEmail(database.db, 'admin@example.com');
    if (!tenant || !admin) throw new Error(`${dataDir} holds a database without the demo tenant; remove DATA_DIR to start fresh`);
    const created = await createApiKey(database.db, { tenantId: tenant.id, name: 'demo key (reissued by pnpm start)' });
    const password = randomBytes(12).toString('base64url');
    await setPassword(database.db, admin.id, password);
    console.log('[start] demo.env was missing: issued a new demo API key and a new demo admin password');
    demo = {
      tenant: 'demo',
      dedicatedName: 'Llama-3.3-70B-Instruct',
      SHARED_MODEL: 'Llama-3.3-70B-Instruct',
      DEDICATED_MODEL: '',
      INFERENCE_API_KEY: created.secret,
      ADMIN_EMAIL: admin.email,
      ADMIN_PASSWORD: password,
    };
  }
  const snapshot = await buildSnapshot(database.db);
  sims = planSims(snapshot);
  // The one provider-prefixed form (what the console shows), from the entry itself: a demo.env written by an
  // older version may hold another form, which the data plane no longer accepts.
  const deployed = snapshot.deployments.find((d) => d.tenantSlug === demo['tenant'] && d.endpointName === demo['dedicatedName']);
  if (deployed) demo['DEDICATED_MODEL'] = dedicatedModelName(deployed.endpointName, deployed.provider);
} finally {
  await database.close();
}

for (const sim of sims) {
  const problem = await portProblem('127.0.0.1', sim.port);
  if (problem === null) continue;
  // A database seeded just now took its runtime ports from SIM_BASE_PORT: start over with another one.
  if (freshDatabase) rmSync(join(dataDir, 'pglite'), { recursive: true, force: true });
  refuse(
    seededNow
      ? portMessage(sim.port, '127.0.0.1', problem, `SIM_BASE_PORT (the simulated runtimes take ${sims.length} ports from it)`)
      : portMessage(sim.port, '127.0.0.1', problem, 'SIM_BASE_PORT with a new DATA_DIR (this one was seeded with its runtime ports)'),
  );
}

if (existsSync(demoFile)) renameSync(demoFile, lastDemoFile);

const values: Record<string, string> = {
  CONSOLE_URL: `${publicAdmin}/`,
  SHARED_BASE_URL: `${publicDataplane}/endpoints/v1`,
  DEDICATED_BASE_URL: `${publicDataplane}/funccall/${demo['tenant']}/endpoints/${encodeURIComponent(demo['dedicatedName'] ?? '')}/v1`,
  SHARED_MODEL: demo['SHARED_MODEL'] ?? '',
  DEDICATED_MODEL: demo['DEDICATED_MODEL'] ?? '',
  INFERENCE_API_KEY: demo['INFERENCE_API_KEY'] ?? '',
  ADMIN_EMAIL: demo['ADMIN_EMAIL'] ?? '',
  ADMIN_PASSWORD: demo['ADMIN_PASSWORD'] ?? '',
  DEMO_TENANT: demo['tenant'] ?? '',
  DEDICATED_NAME: demo['dedicatedName'] ?? '',
};

const webRoot = existsSync(join(root, 'apps/web/dist/index.html')) ? join(root, 'apps/web/dist') : join(root, 'apps/web/public');
try {
  for (const sim of sims) {
    const args = ['--port', String(sim.port), '--host', '127.0.0.1', '--ttft-ms', String(env.SIM_TTFT_MS), '--itl-ms', String(env.SIM_ITL_MS)];
    for (const m of sim.models) args.push('--model', m);
    if (sim.maxContextLength !== null) args.push('--max-context-length', String(sim.maxContextLength));
    launch(`sim:${sim.port}`, 'packages/runtime-sim/src/cli.ts', args, {});
  }
  launch('admin-api', 'apps/admin-api/src/server.ts', [], {
    ADMIN_HOST: env.HOST,
    ADMIN_PORT: String(env.ADMIN_PORT),
    DATA_DIR: dataDir,
    NODE_TOKEN: nodeToken,
    SHARED_BASE_URL: values['SHARED_BASE_URL']!,
    DATAPLANE_URL: publicDataplane,
    WEB_ROOT: webRoot,
    LOG_LEVEL: env.LOG_LEVEL,
    LOCAL_SIM_TTFT_MS: String(env.SIM_TTFT_MS),
    LOCAL_SIM_ITL_MS: String(env.SIM_ITL_MS),
    LOCAL_COLD_START_CAP_MS: String(Math.round(env.SIM_COLD_START_CAP_SECONDS * 1000)),
    ...(env.DATABASE_URL ? { DATABASE_URL: env.DATABASE_URL } : {}),
  });
  await waitForHttp(`${adminUrl}/readyz`, 60_000);
  dataplane = launch(
    'dataplane',
    'apps/dataplane/dist/server.js',
    [],
    {
      ...DATAPLANE_NODE_ENV,
      HOST: env.HOST,
      PORT: String(env.PORT),
      CONTROL_PLANE_URL: adminUrl,
      NODE_TOKEN: nodeToken,
      SNAPSHOT_FILE: join(dataDir, 'dataplane-snapshot.json'),
      USAGE_SPOOL_DIR: join(dataDir, 'dataplane-usage'),
      LOG_LEVEL: env.LOG_LEVEL,
      METRICS_HOST: env.HOST,
      METRICS_PORT: String(metricsPort),
    },
    DATAPLANE_NODE_FLAGS,
  );
  // The data plane is ready as soon as it holds a snapshot, and it may hold the one it saved in the last run, from
  // before this start issued a demo key: wait until it has the control plane's config as of now, so that the key in
  // demo.env works at once (it answered 401 for a moment after a restart that reissued the key).
  const current = await configSnapshot();
  await waitForHttp(`${dataplaneUrl}/readyz`, 60_000, (body) => Number((body as { configVersion?: unknown }).configVersion) >= current.version);
  await Promise.all(sims.map((s) => waitForHttp(`http://127.0.0.1:${s.port}/health`, 60_000)));
  await waitForDedicatedReplicas(60_000);
} catch (err) {
  console.error(`[start] ${(err as Error).message}; stopping everything`);
  stopAll(1);
  await new Promise(() => {}); // stopAll exits once the children are gone
}
// Only now, and whole: whoever sees demo.env can call the API with it at once.
writeFileAtomic(
  demoFile,
  Object.entries(values)
    .map(([k, v]) => `${k}=${v}`)
    .join('\n') + '\n',
);
rmSync(lastDemoFile, { force: true });

/** The control plane's routing config as a node gets it. */
async function configSnapshot(): Promise<ConfigSnapshot> {
  const res = await fetch(`${adminUrl}/internal/v1/config/snapshot`, { headers: { authorization: `Bearer ${nodeToken}` } });
  if (!res.ok) throw new Error(`the control plane's config snapshot answered ${res.status}`);
  return configSnapshotSchema.parse(await res.json());
}

/** The local provisioner (in the control plane) starts dedicated replicas; wait so the printed URL answers. */
async function waitForDedicatedReplicas(timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (deploymentsSettled(await configSnapshot())) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  console.error('[start] dedicated deployments are still provisioning; the dedicated URL may answer 503 for a moment');
}

console.log(`
Inference platform (beta) is running. Without a GPU, every seeded endpoint answers from the runtime simulator.

  Console            ${values['CONSOLE_URL']}
  Shared base URL    ${values['SHARED_BASE_URL']}
  Dedicated base URL ${values['DEDICATED_BASE_URL']}
  Shared model       ${values['SHARED_MODEL']}
  Dedicated model    ${values['DEDICATED_MODEL']}
  API key            ${values['INFERENCE_API_KEY']}
  Metrics (internal) http://${env.HOST}:${metricsPort}/metrics
  Login              ${values['ADMIN_EMAIL']} / ${values['ADMIN_PASSWORD']}

  These values are in ${demoFile} (mode 0600): \`set -a; . ${env.DATA_DIR}/demo.env; set +a\`
  Ctrl-C stops everything.
`);
