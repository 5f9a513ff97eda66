import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { createDb, DataDirInUseError, migrateToLatest, type Database } from '@infer/db';
import { buildAdminApp } from './app.ts';
import { loadEnv, type AdminEnv } from './env.ts';
import { createDefaultProvisioners } from './modules/deployments/deployments-context.ts';
import { kubernetesProvisionerFromEnv } from './modules/deployments/provisioners/kubernetes/from-env.ts';
import { installSecretKeyring, loadOrCreateKeyFile, parseKeyring } from './modules/secrets/secret-keyring.ts';
import { resealUpstreamKeys } from './modules/secrets/upstream-secrets.ts';
import { createAddressGuard } from '@infer/shared/address-guard';

let env: AdminEnv;
try {
  env = loadEnv();
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
}

let database: Database | undefined;
let app: FastifyInstance | undefined;
let closing = false;

// Installed before start-up so a signal during migration still closes the database cleanly.
async function shutdown(signal: string): Promise<void> {
  if (closing) return;
  closing = true;
  app?.log.info({ signal }, 'shutting down');
  const timer = setTimeout(() => process.exit(1), 10_000);
  timer.unref();
  try {
    await app?.close();
    await database?.close();
    process.exit(0);
  } catch (err) {
    console.error('admin-api shutdown failed', err);
    process.exit(1);
  }
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));

database = await createDb(
  env.DATABASE_URL
    ? { databaseUrl: env.DATABASE_URL, onIdleError: (err) => console.warn(`idle database connection lost: ${err.message}`) }
    : { dataDir: join(env.DATA_DIR, 'pglite') },
).catch((err: unknown) => {
  if (!(err instanceof DataDirInUseError)) throw err;
  console.error(`${err.message}: stop it, or set DATA_DIR to another folder (or DATABASE_URL to a PostgreSQL)`);
  return process.exit(1);
});
await migrateToLatest(database.db);
try {
  installSecretKeyring(parseKeyring(env.SECRETS_ENCRYPTION_KEY ?? loadOrCreateKeyFile(join(env.DATA_DIR, 'secrets.key'))));
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
}
// Plaintext rows from before encryption, or rows sealed with a key that is no longer the first (rotation).
const resealed = await resealUpstreamKeys(database.db);
if (resealed > 0) console.log(`sealed ${resealed} upstream API key value(s) with the current secrets key`);
if (!closing) {
  app = await buildAdminApp({
    db: database.db,
    dbKind: database.kind,
    pgPool: database.pool,
    nodeToken: env.NODE_TOKEN,
    publicUrls: { sharedBaseUrl: env.SHARED_BASE_URL, dataplaneUrl: env.DATAPLANE_URL },
    webRoot: env.WEB_ROOT,
    logger: { level: env.LOG_LEVEL, redact: ['req.headers.authorization', 'req.headers.cookie'] },
    provisioners: createDefaultProvisioners({
      local: { ttftMs: env.LOCAL_SIM_TTFT_MS, itlMs: env.LOCAL_SIM_ITL_MS, coldStartCapMs: env.LOCAL_COLD_START_CAP_MS },
      external: { addressGuard: createAddressGuard({ allowAll: env.EXTERNAL_ALLOW_PRIVATE_URLS, allowedCidrs: env.ALLOWED_PRIVATE_CIDRS }) },
      kubernetes: kubernetesProvisionerFromEnv(env, database.db),
    }),
    allowPrivateExternalUrls: env.EXTERNAL_ALLOW_PRIVATE_URLS,
    allowedPrivateCidrs: env.ALLOWED_PRIVATE_CIDRS,
    consoleOrigins: env.CONSOLE_ORIGINS,
    trustProxy: env.TRUST_PROXY,
    apiStatementTimeoutMs: env.API_STATEMENT_TIMEOUT_MS,
    principalPointsPerMinute: env.API_POINTS_PER_MINUTE,
    pollMs: env.OUTBOX_POLL_MS,
    metricsToken: env.METRICS_TOKEN,
    outboxPrune:
      env.OUTBOX_PRUNE_INTERVAL_S === 0
        ? false
        : {
            intervalMs: env.OUTBOX_PRUNE_INTERVAL_S * 1000,
            retainRows: env.OUTBOX_RETAIN_ROWS,
            retainHours: env.OUTBOX_RETAIN_HOURS,
          },
    replicaBaseConcurrency: env.REPLICA_BASE_CONCURRENCY,
    replicaLifecycle: {
      startTimeoutMs: env.REPLICA_START_TIMEOUT_S * 1000,
      maxStartAttempts: env.REPLICA_START_ATTEMPTS,
      startRetryBackoffMs: env.REPLICA_START_BACKOFF_MS,
      drainTimeoutMs: env.REPLICA_DRAIN_TIMEOUT_S * 1000,
    },
    autoscaler: env.AUTOSCALER_ENABLED
      ? {
          tickMs: env.AUTOSCALER_TICK_MS,
          windows: {
            stableWindowMs: env.AUTOSCALER_STABLE_WINDOW_S * 1000,
            panicWindowMs: env.AUTOSCALER_PANIC_WINDOW_S * 1000,
            panicThreshold: env.AUTOSCALER_PANIC_THRESHOLD,
          },
          reportTtlMs: env.LOAD_REPORT_TTL_S * 1000,
          heartbeatMs: env.GPU_LEDGER_HEARTBEAT_MS,
        }
      : undefined,
  });
  await app.listen({ host: env.ADMIN_HOST, port: env.ADMIN_PORT });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : env.ADMIN_PORT;
  console.log(`admin-api listening on http://${env.ADMIN_HOST}:${port}`);
  // Local replicas of an earlier process are gone: start them again (new ports reach the data plane by the outbox).
  // With the autoscaler on, its leader does this once elected (a follower must not start replicas).
  if (!app.autoscaler) void app.deployments.reconciler.reconcileAll().catch((err: unknown) => app?.log.error({ err }, 'deployment reconcile failed'));
}
