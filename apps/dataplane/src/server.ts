import { join, resolve } from 'node:path';
import { hostname } from 'node:os';
import pino from 'pino';
import { buildDataplaneApp } from './app.ts';
import { createNodeChannel } from './scale/node-channel.ts';
import { createConfigClient } from './config/config-client.ts';
import { createConfigStore } from './config/config-store.ts';
import { readSnapshotFile, snapshotFileKey } from './config/snapshot-file.ts';
import { loadEnv } from './env.ts';
import { loggerOptions } from './logging.ts';
import type { DataplaneEnv } from './env.ts';
import { createUsageReporter } from './usage/usage-reporter.ts';
import { startMemoryReclaim } from './memory-reclaim.ts';
import type { UsageSink } from './usage/usage-reporter.ts';

let env: DataplaneEnv;
try {
  env = loadEnv();
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}

/**
 * Requests in flight may finish for SHUTDOWN_DRAIN_MS after a stop signal; those still open are then stopped (each with
 * its usage record), and these 5 s more send the records before the process exits whatever is left.
 */
const SHUTDOWN_GRACE_MS = env.SHUTDOWN_DRAIN_MS + 5_000;
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));
const controlPlane = env.CONTROL_PLANE_URL !== undefined && env.NODE_TOKEN !== undefined ? { url: env.CONTROL_PLANE_URL, nodeToken: env.NODE_TOKEN } : null;

// One logger for the app and for this file's own lines: every line is pino's JSON (numeric level, time, pid).
const log = pino(loggerOptions(env.LOG_LEVEL));

const store = createConfigStore();
if (env.CONFIG_FILE !== undefined) {
  try {
    store.replace(readSnapshotFile(env.CONFIG_FILE, env.NODE_TOKEN !== undefined ? snapshotFileKey(env.NODE_TOKEN) : undefined));
  } catch (err) {
    console.error(messageOf(err));
    process.exit(1);
  }
}

// Usage problems are logged at most once per this interval (a control plane away for an hour is one line a minute).
const USAGE_WARN_EVERY_MS = 60_000;
let lastUsageWarn = 0;
let usageWarnings = 0;
const usageProblem = (err: unknown): void => {
  usageWarnings++;
  const now = Date.now();
  if (now - lastUsageWarn < USAGE_WARN_EVERY_MS) return;
  lastUsageWarn = now;
  log.warn({ reason: messageOf(err), occurrences: usageWarnings, pending: reporter?.pending() }, 'usage report problem; records stay spooled and are retried');
  usageWarnings = 0;
};

// Standalone (CONFIG_FILE only) runs have nowhere to bill; records are dropped.
let reporter: ReturnType<typeof createUsageReporter> | null = null;
if (controlPlane) {
  const spoolDir = resolve(env.USAGE_SPOOL_DIR ?? join('.data', `dataplane-usage-${env.PORT}`));
  try {
    reporter = createUsageReporter({ ...controlPlane, flushMs: env.USAGE_FLUSH_MS, spoolDir, fsyncMs: env.USAGE_FSYNC_MS, onError: usageProblem });
  } catch (err) {
    console.error(`cannot open the usage spool: ${messageOf(err)}`);
    process.exit(1);
  }
  if (reporter.recovered > 0) {
    log.warn({ records: reporter.recovered, spoolDir }, 'replaying usage records left in the spool by an earlier run');
  }
}
const usage: UsageSink = reporter ?? { record() {} };

// Load reports go out every second: a control plane that is away is one warning a minute, not sixty.
let lastScaleWarn = 0;
const scaleProblem = (err: unknown): void => {
  if (Date.now() - lastScaleWarn < 60_000) return;
  lastScaleWarn = Date.now();
  log.warn({ reason: messageOf(err) }, 'control plane did not take a load report or wake; requests are not blocked');
};

const app = buildDataplaneApp({
  store,
  usage,
  loggerInstance: log,
  bodyLimit: env.BODY_LIMIT_BYTES,
  limits: {
    defaultRpm: env.DEFAULT_RPM_LIMIT ?? null,
    defaultTpm: env.DEFAULT_TPM_LIMIT ?? null,
    defaultCompletionTokens: env.DEFAULT_COMPLETION_TOKENS,
    replicaBaseConcurrency: env.REPLICA_BASE_CONCURRENCY,
    queueMax: env.QUEUE_MAX,
    queueTimeoutMs: env.QUEUE_TIMEOUT_MS,
    redisUrl: env.REDIS_URL ?? null,
    redisPrefix: env.REDIS_KEY_PREFIX,
  },
  timeouts: { connectMs: env.CONNECT_TIMEOUT_MS, firstByteMs: env.FIRST_BYTE_TIMEOUT_MS, responseMs: env.RESPONSE_TIMEOUT_MS, idleMs: env.IDLE_TIMEOUT_MS },
  ejection: { failures: env.EJECT_AFTER_FAILURES, cooldownMs: env.EJECT_COOLDOWN_MS },
  maxRetries: env.UPSTREAM_MAX_RETRIES,
  routing: { policy: env.ROUTING_POLICY, scrapeIntervalMs: env.ROUTING_SCRAPE_MS, staleMs: env.ROUTING_STALE_MS, holdMs: env.ROUTING_HOLD_MS },
  allowedPrivateCidrs: env.ALLOWED_PRIVATE_CIDRS,
  front: env.HTTP_FRONT === 'on',
  metricsListener: { port: env.METRICS_PORT, host: env.METRICS_HOST, token: env.METRICS_TOKEN ?? null },
  // Serverless: hold through cold starts and report load (stopped with the app); standalone nodes hold nothing.
  scale: {
    channel: controlPlane
      ? createNodeChannel({ ...controlPlane, nodeId: env.NODE_ID ?? `${hostname()}-${env.PORT}`, onError: (err) => scaleProblem(err) })
      : null,
    queueMax: env.SCALE_HOLD_QUEUE_MAX,
    holdMinMs: env.SCALE_HOLD_MIN_MS,
    holdMaxMs: env.SCALE_HOLD_MAX_MS,
    tickMs: env.LOAD_REPORT_MS,
    wakeResendMs: env.WAKE_RESEND_MS,
  },
});

const client = controlPlane
  ? createConfigClient({
      ...controlPlane,
      store,
      ...(env.SNAPSHOT_FILE !== undefined ? { snapshotFile: env.SNAPSHOT_FILE } : {}),
      onError: (err) => app.log.warn({ reason: messageOf(err) }, 'config stream problem; reconnecting'),
      // Once per refusal (the client keeps asking, quietly); the credential itself is never logged.
      onRefused: (status) =>
        app.log.error(
          { status },
          "the control plane refused this node's credential: failing closed (/readyz and inference requests answer 503) until it is accepted again; restore or rotate NODE_TOKEN",
        ),
      onAccepted: () => app.log.warn("the control plane accepts this node's credential again: serving"),
    })
  : null;
client?.start();

// Behind a load balancer: keep idle connections longer than its idle timeout (commonly 60 s).
app.server.keepAliveTimeout = 72_000;
app.server.headersTimeout = 75_000;
app.server.requestTimeout = 300_000;

// After a burst of requests has ended, V8's heap pages go back to the system (src/memory-reclaim.ts). The load is
// requests in flight, not open connections: a load balancer's idle keep-alive connections would hold it up.
startMemoryReclaim({
  load: () => app.inFlightNow(),
  onReclaim: (r) => app.log.info(r, 'memory given back after a load drop'),
});

/** The last usage flush at shutdown, once (the forced exit may start it while the close is held up). */
let flushing: ReturnType<NonNullable<typeof reporter>['close']> | undefined;
const lastFlush = () => (flushing ??= reporter?.close());
/** How long a forced exit waits for that flush. */
const LAST_FLUSH_MS = 2_000;

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  app.log.warn({ signal }, 'shutting down: draining requests');
  // Past the grace, whatever still holds the close up: one last usage flush, bounded, then exit.
  const force = setTimeout(() => {
    app.log.error('shutdown grace over: exiting with connections still open');
    void Promise.race([lastFlush(), new Promise((r) => setTimeout(r, LAST_FLUSH_MS))]).finally(() => process.exit(1));
  }, SHUTDOWN_GRACE_MS);
  force.unref();
  const drained = setTimeout(() => {
    const stopped = app.stopInFlight();
    if (stopped > 0) app.log.warn({ stopped }, 'drain time over: stopped the requests still in flight (their usage is recorded) and uploads still coming');
  }, env.SHUTDOWN_DRAIN_MS);
  drained.unref();
  try {
    await app.close(); // stops accepting, waits for in-flight requests and streams (stopped at SHUTDOWN_DRAIN_MS)
    clearTimeout(drained);
    await client?.close();
    const left = await lastFlush(); // what is left stays in the spool
    if (left !== undefined && left.remaining > 0) {
      app.log.warn({ remaining: left.remaining }, 'usage records not yet accepted by the control plane stay spooled; they are sent at the next start');
    }
  } catch (err) {
    app.log.error({ reason: messageOf(err) }, 'shutdown failed');
    process.exit(1);
  }
  process.exit(0);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));

try {
  await app.listen({ port: env.PORT, host: env.HOST, backlog: env.LISTEN_BACKLOG });
} catch (err) {
  console.error(`dataplane could not listen on ${env.HOST}:${env.PORT}: ${messageOf(err)}`);
  process.exit(1);
}
const bound = app.server.address();
const port = typeof bound === 'object' && bound !== null ? bound.port : env.PORT;
const host = env.HOST.includes(':') ? `[${env.HOST}]` : env.HOST;
console.log(`dataplane listening on http://${host}:${port}`);
