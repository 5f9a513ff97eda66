import { trimTrailingSlashes } from '@infer/shared';
import { isIP } from 'node:net';
import { z } from 'zod';
import { cidrListEnv } from '@infer/shared/address-guard';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
const optionalUrl = optionalString.pipe(z.url({ protocol: /^https?$/ }).optional());

const schema = z.object({
  ADMIN_HOST: z.string().min(1).default('127.0.0.1'),
  ADMIN_PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  DATABASE_URL: optionalString.pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  DATA_DIR: z.string().min(1).default('.data'),
  NODE_TOKEN: optionalString.pipe(z.string().min(16, 'NODE_TOKEN must be at least 16 characters (or unset: per-node credentials only)').optional()),
  SECRETS_ENCRYPTION_KEY: optionalString,
  DATAPLANE_URL: optionalUrl,
  SHARED_BASE_URL: optionalUrl,
  WEB_ROOT: optionalString,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  CONSOLE_ORIGINS: optionalString.transform((v, ctx) => {
    const list = (v ?? '')
      .split(',')
      .map((o) => o.trim())
      .filter((o) => o.length > 0);
    for (const o of list) {
      let url: URL | undefined;
      try {
        url = new URL(o);
      } catch {
        url = undefined;
      }
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== trimTrailingSlashes(o)) {
        ctx.addIssue({ code: 'custom', message: `${JSON.stringify(o)} is not an origin like https://console.example.com (comma-separated)` });
      }
    }
    return Object.freeze(list.map((o) => trimTrailingSlashes(o)));
  }),
  LOCAL_SIM_TTFT_MS: z.coerce.number().min(0).default(120),
  LOCAL_SIM_ITL_MS: z.coerce.number().min(0).default(15),
  LOCAL_COLD_START_CAP_MS: z.coerce.number().int().min(0).default(10_000),
  EXTERNAL_ALLOW_PRIVATE_URLS: z
    .enum(['true', 'false', '1', '0'])
    .default('false')
    .transform((v) => v === 'true' || v === '1'),
  ALLOWED_PRIVATE_CIDRS: cidrListEnv,
  OUTBOX_RETAIN_ROWS: z.coerce
    .number({ error: 'OUTBOX_RETAIN_ROWS must be a whole number of rows (at least 1)' })
    .int('OUTBOX_RETAIN_ROWS must be a whole number of rows (at least 1)')
    .min(1, 'OUTBOX_RETAIN_ROWS must be at least 1 (the newest row is the config version)')
    .default(10_000),
  OUTBOX_RETAIN_HOURS: z.coerce
    .number({ error: 'OUTBOX_RETAIN_HOURS must be a number of hours (0: no age limit)' })
    .min(0, 'OUTBOX_RETAIN_HOURS must be 0 (no age limit) or more')
    .default(24),
  OUTBOX_PRUNE_INTERVAL_S: z.coerce
    .number({ error: 'OUTBOX_PRUNE_INTERVAL_S must be a number of seconds (0: never prune)' })
    .min(0, 'OUTBOX_PRUNE_INTERVAL_S must be 0 (never prune) or more')
    .default(600),
  OUTBOX_POLL_MS: z.coerce
    .number({ error: 'OUTBOX_POLL_MS must be a number of milliseconds' })
    .int()
    .min(10, 'OUTBOX_POLL_MS must be at least 10')
    .default(250),
  METRICS_TOKEN: optionalString.pipe(z.string().min(16, 'METRICS_TOKEN must be at least 16 characters').optional()),
  K8S_NAMESPACE: optionalString.pipe(
    z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'K8S_NAMESPACE must be a Kubernetes namespace name')
      .optional(),
  ),
  KUBECONFIG: optionalString,
  KUBERNETES_SERVICE_HOST: optionalString,
  K8S_VLLM_IMAGE: z.string().trim().min(1).default('vllm/vllm-openai:latest'),
  K8S_SGLANG_IMAGE: z.string().trim().min(1).default('lmsysorg/sglang:latest'),
  K8S_TGI_IMAGE: z.string().trim().min(1).default('ghcr.io/huggingface/text-generation-inference:latest'),
  K8S_DRAIN_SECONDS: z.coerce.number({ error: 'K8S_DRAIN_SECONDS must be a number of seconds' }).int().min(0).max(3600).default(30),
  K8S_REPLICA_ADDRESS: z.enum(['pod', 'service'], { error: 'K8S_REPLICA_ADDRESS must be pod or service' }).default('pod'),
  K8S_UNSCHEDULABLE_GRACE_S: z.coerce.number({ error: 'K8S_UNSCHEDULABLE_GRACE_S must be a number of seconds' }).min(0).max(3600).default(0),
  TRUST_PROXY: optionalString.transform((v, ctx) => {
    if (v === undefined || v === 'false' || v === '0') return false;
    if (v === 'true') return true;
    if (/^[1-9]\d*$/.test(v)) return Number(v);
    const list = v
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    for (const a of list) {
      const [ip, bits] = a.split('/');
      const named = ['loopback', 'linklocal', 'uniquelocal'].includes(a);
      if (!named && (isIP(ip ?? '') === 0 || (bits !== undefined && !/^\d{1,3}$/.test(bits)))) {
        ctx.addIssue({
          code: 'custom',
          message: `${JSON.stringify(a)} is not a proxy address: TRUST_PROXY takes true, a hop count, or addresses/CIDRs (comma-separated; also loopback, linklocal, uniquelocal)`,
        });
      }
    }
    return Object.freeze(list);
  }),
  API_STATEMENT_TIMEOUT_MS: z.coerce
    .number({ error: 'API_STATEMENT_TIMEOUT_MS must be a number of milliseconds (0: none)' })
    .int()
    .min(0, 'API_STATEMENT_TIMEOUT_MS must be 0 (none) or more')
    .default(5000),
  API_POINTS_PER_MINUTE: z.coerce
    .number({ error: 'API_POINTS_PER_MINUTE must be a whole number' })
    .int()
    .min(1, 'API_POINTS_PER_MINUTE must be at least 1')
    .default(1200),
  AUTOSCALER_ENABLED: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
  AUTOSCALER_TICK_MS: z.coerce.number().int().min(50, 'AUTOSCALER_TICK_MS must be at least 50').default(1000),
  AUTOSCALER_STABLE_WINDOW_S: z.coerce.number().min(1, 'AUTOSCALER_STABLE_WINDOW_S must be at least 1').default(60),
  AUTOSCALER_PANIC_WINDOW_S: z.coerce.number().min(0.1, 'AUTOSCALER_PANIC_WINDOW_S must be at least 0.1').default(6),
  AUTOSCALER_PANIC_THRESHOLD: z.coerce.number().min(1, 'AUTOSCALER_PANIC_THRESHOLD must be at least 1').default(2),
  LOAD_REPORT_TTL_S: z.coerce.number().min(0.5, 'LOAD_REPORT_TTL_S must be at least 0.5').default(3),
  GPU_LEDGER_HEARTBEAT_MS: z.coerce.number().int().min(100, 'GPU_LEDGER_HEARTBEAT_MS must be at least 100').default(1000),
  REPLICA_START_TIMEOUT_S: z.coerce.number().min(1, 'REPLICA_START_TIMEOUT_S must be at least 1').default(120),
  REPLICA_START_ATTEMPTS: z.coerce.number().int().min(1, 'REPLICA_START_ATTEMPTS must be at least 1').default(3),
  REPLICA_START_BACKOFF_MS: z.coerce.number().int().min(0, 'REPLICA_START_BACKOFF_MS must be 0 or more').default(2000),
  REPLICA_DRAIN_TIMEOUT_S: z.coerce.number().min(0, 'REPLICA_DRAIN_TIMEOUT_S must be 0 or more').default(30),
  REPLICA_BASE_CONCURRENCY: z.coerce.number().int().min(1, 'REPLICA_BASE_CONCURRENCY must be at least 1').default(32),
});

export interface AdminEnv {
  readonly ADMIN_HOST: string;
  readonly ADMIN_PORT: number;
  readonly DATABASE_URL: string | undefined;
  readonly DATA_DIR: string;
  /** Bootstrap secret of data-plane nodes; unset: only per-node `infn_…` credentials are accepted. */
  readonly NODE_TOKEN: string | undefined;
  /** Keyring sealing upstream API keys at rest: `<id>:<base64 32 bytes>`, newest first, comma-separated (unset: DATA_DIR/secrets.key). */
  readonly SECRETS_ENCRYPTION_KEY: string | undefined;
  readonly DATAPLANE_URL: string;
  readonly SHARED_BASE_URL: string;
  readonly WEB_ROOT: string | undefined;
  readonly LOG_LEVEL: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Origins of consoles served elsewhere that may send cookie-authenticated mutations (CSRF allow-list). */
  readonly CONSOLE_ORIGINS: readonly string[];
  /** Latency of the runtime-sim replicas the local provisioner starts. */
  readonly LOCAL_SIM_TTFT_MS: number;
  readonly LOCAL_SIM_ITL_MS: number;
  /** Local replicas simulate the entry's Cold Start TTFT, capped at this. */
  readonly LOCAL_COLD_START_CAP_MS: number;
  /** Let tenants register external runtimes on loopback/private addresses. */
  readonly EXTERNAL_ALLOW_PRIVATE_URLS: boolean;
  /** Non-public CIDRs tenants' external runtimes may use anyway (a peered network); empty: none. */
  readonly ALLOWED_PRIVATE_CIDRS: readonly string[];
  /** Config outbox: keep at most this many newest rows (the newest is always kept). */
  readonly OUTBOX_RETAIN_ROWS: number;
  /** Config outbox: drop rows older than this (0: no age limit). */
  readonly OUTBOX_RETAIN_HOURS: number;
  /** Seconds between outbox prunes (0: never prune). */
  readonly OUTBOX_PRUNE_INTERVAL_S: number;
  /** Outbox poll interval, the fallback when a NOTIFY is missed or the LISTEN connection is down. */
  readonly OUTBOX_POLL_MS: number;
  /** Bearer token for `GET /metrics`; unset: `/metrics` is not served. */
  readonly METRICS_TOKEN: string | undefined;
  /** Kubernetes provisioner: the namespace its Deployments and Services live in; unset: no Kubernetes provisioner. */
  readonly K8S_NAMESPACE: string | undefined;
  /** Kubeconfig file for the Kubernetes provisioner; unset: the pod's service account (in-cluster). */
  readonly KUBECONFIG: string | undefined;
  /** Set by Kubernetes inside a pod; tells whether in-cluster credentials exist. */
  readonly KUBERNETES_SERVICE_HOST: string | undefined;
  /** Default images per runtime (a catalog entry's runtimeConfig.image overrides). */
  readonly K8S_VLLM_IMAGE: string;
  readonly K8S_SGLANG_IMAGE: string;
  readonly K8S_TGI_IMAGE: string;
  /** Seconds a stopping runtime pod keeps serving requests in flight (terminationGracePeriodSeconds = this + 5 s preStop). */
  readonly K8S_DRAIN_SECONDS: number;
  /** Replica addresses in the routing snapshot: each pod's IP, or the Service's cluster DNS name. */
  readonly K8S_REPLICA_ADDRESS: 'pod' | 'service';
  /** How long a pod may stay unschedulable (e.g. waiting for a cluster autoscaler) before its start fails. */
  readonly K8S_UNSCHEDULABLE_GRACE_S: number;
  /** Proxies whose X-Forwarded-For/Host/Proto are believed: false (none), true (any), a hop count, or addresses/CIDRs. */
  readonly TRUST_PROXY: boolean | number | readonly string[];
  /** PostgreSQL statement_timeout of tRPC and GraphQL queries (0: none; PGlite cannot interrupt a statement). */
  readonly API_STATEMENT_TIMEOUT_MS: number;
  /** Work budget per caller per minute on tRPC and GraphQL (one point a call, GraphQL one per 25 fields). */
  readonly API_POINTS_PER_MINUTE: number;
  /** Serverless autoscaler (docs/autoscaling.md); off: replicas follow min/desired counts set by API calls and wakes. */
  readonly AUTOSCALER_ENABLED: boolean;
  readonly AUTOSCALER_TICK_MS: number;
  readonly AUTOSCALER_STABLE_WINDOW_S: number;
  readonly AUTOSCALER_PANIC_WINDOW_S: number;
  readonly AUTOSCALER_PANIC_THRESHOLD: number;
  /** A node's load report counts this long. */
  readonly LOAD_REPORT_TTL_S: number;
  /** GPU-time ledger heartbeat: at most this much replica time is lost when the leader dies. */
  readonly GPU_LEDGER_HEARTBEAT_MS: number;
  /** A replica not ready this long after its (simulated) cold start is replaced. */
  readonly REPLICA_START_TIMEOUT_S: number;
  /** Failed starts in a row before a deployment stops retrying and reports why. */
  readonly REPLICA_START_ATTEMPTS: number;
  /** Wait before the next start after a failed one, doubled with each failure in a row (at most 30 s). */
  readonly REPLICA_START_BACKOFF_MS: number;
  /** Longest wait for a draining replica's in-flight requests. */
  readonly REPLICA_DRAIN_TIMEOUT_S: number;
  /** The data plane's REPLICA_BASE_CONCURRENCY (keep equal): default target concurrency = this x the entry's Concurrency. */
  readonly REPLICA_BASE_CONCURRENCY: number;
}

/** Reads and validates the environment once; throws one message naming every bad variable. */
export function loadEnv(source: Readonly<Record<string, string | undefined>> = process.env): AdminEnv {
  const parsed = schema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`Invalid admin-api environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  if (e.K8S_NAMESPACE && !e.KUBECONFIG && !e.KUBERNETES_SERVICE_HOST) {
    throw new Error(
      'Invalid admin-api environment:\n  K8S_NAMESPACE: needs KUBECONFIG (a kubeconfig file) or to run inside a Kubernetes pod (service account)',
    );
  }
  const dataplaneUrl = trimTrailingSlashes(e.DATAPLANE_URL ?? 'http://127.0.0.1:8080');
  return Object.freeze({
    ...e,
    DATABASE_URL: e.DATABASE_URL,
    METRICS_TOKEN: e.METRICS_TOKEN,
    NODE_TOKEN: e.NODE_TOKEN,
    K8S_NAMESPACE: e.K8S_NAMESPACE,
    DATAPLANE_URL: dataplaneUrl,
    SHARED_BASE_URL: trimTrailingSlashes(e.SHARED_BASE_URL ?? `${dataplaneUrl}/endpoints/v1`),
  });
}

/** The schema itself, read by scripts/env-doc.ts for infra/README.md's environment table (names and defaults). */
export { schema as adminEnvSchema };
