import { z } from 'zod';
import { cidrListEnv } from '@infer/shared/address-guard';

const port = (fallback: number) => z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(0).max(65535).default(fallback);
const ms = (fallback: number) => z.coerce.number({ error: 'must be a number of milliseconds' }).int('must be an integer').min(1).default(fallback);
const optionalString = z.string().trim().min(1).optional().catch(undefined);
const count = (what: string, min: number) =>
  z.coerce
    .number({ error: `must be a number of ${what}` })
    .int('must be an integer')
    .min(min, `must be at least ${min}`);

const envSchema = z
  .object({
    PORT: port(8080),
    HOST: z.string().trim().min(1).default('127.0.0.1'),
    // Accept queue of the public listener: Node's 511 drops connects when hundreds arrive at once (the kernel caps it at somaxconn).
    LISTEN_BACKLOG: count('connections', 1).default(4096),
    CONTROL_PLANE_URL: z.url({ error: 'must be an http(s) URL' }).optional(),
    NODE_TOKEN: optionalString,
    CONFIG_FILE: optionalString,
    SNAPSHOT_FILE: optionalString,
    USAGE_FLUSH_MS: ms(1000),
    // Durable usage spool (src/usage/usage-spool.ts); default .data/dataplane-usage-<PORT> under the working directory.
    USAGE_SPOOL_DIR: optionalString,
    USAGE_FSYNC_MS: ms(100),
    // After SIGTERM/SIGINT, requests in flight may finish this long; then they are stopped with their usage recorded.
    SHUTDOWN_DRAIN_MS: ms(25_000),
    BODY_LIMIT_BYTES: z.coerce
      .number({ error: 'must be a number of bytes' })
      .int('must be an integer')
      .min(1024, 'must be at least 1024')
      .default(1024 * 1024),
    CONNECT_TIMEOUT_MS: ms(5000),
    FIRST_BYTE_TIMEOUT_MS: ms(120_000),
    RESPONSE_TIMEOUT_MS: ms(600_000),
    IDLE_TIMEOUT_MS: ms(60_000),
    EJECT_AFTER_FAILURES: z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(1).default(3),
    EJECT_COOLDOWN_MS: ms(10_000),
    // Operator allow-list: non-public CIDRs tenants' external runtimes may be dialled at (comma-separated).
    ALLOWED_PRIVATE_CIDRS: cidrListEnv,
    UPSTREAM_MAX_RETRIES: z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(0).max(5).default(2),
    // Limits (src/limits): the RPM/TPM defaults are the window of a tenant that sets none; unset: unlimited.
    DEFAULT_RPM_LIMIT: count('requests per minute', 1).optional(),
    DEFAULT_TPM_LIMIT: count('tokens per minute', 1).optional(),
    DEFAULT_COMPLETION_TOKENS: count('tokens', 1).default(4096),
    REPLICA_BASE_CONCURRENCY: count('requests', 1).default(32),
    QUEUE_MAX: count('requests', 0).default(64),
    QUEUE_TIMEOUT_MS: ms(10_000),
    REDIS_URL: z.url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' }).optional(),
    REDIS_KEY_PREFIX: z.string().trim().min(1).default('infer:rl'),
    // The internal /metrics listener (never on the public PORT); METRICS_PORT=0 picks a free port.
    METRICS_PORT: port(9464),
    METRICS_HOST: z.string().trim().min(1).default('127.0.0.1'),
    METRICS_TOKEN: optionalString,
    // Serverless deployments (src/scale): this node's id in wakes and load reports (default <hostname>-<PORT>),
    // requests held per deployment, the hold deadline's bounds, and the load report / wake re-send periods.
    NODE_ID: optionalString,
    SCALE_HOLD_QUEUE_MAX: count('requests', 0).default(1000),
    SCALE_HOLD_MIN_MS: ms(30_000),
    SCALE_HOLD_MAX_MS: ms(600_000),
    LOAD_REPORT_MS: ms(1000),
    WAKE_RESEND_MS: ms(3000),
    // Routing across replicas (src/routing): the default policy (catalog entries and deployments may set their
    // own), how often each replica's /metrics is scraped, when metrics count as stale (least in flight then), and
    // how long a request waits for a saturated target before a 429 (0: at once).
    ROUTING_POLICY: z.enum(['scorer', 'least_in_flight', 'round_robin', 'random']).default('scorer'),
    ROUTING_SCRAPE_MS: ms(250),
    ROUTING_STALE_MS: ms(2000),
    ROUTING_HOLD_MS: z.coerce.number({ error: 'must be a number of milliseconds' }).int('must be an integer').min(0).default(1000),
    // The node's own HTTP/1.1 front for plain chat requests (src/front); off: Node's HTTP server reads every request.
    HTTP_FRONT: z.enum(['on', 'off']).default('on'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('warn'),
  })
  .superRefine((e, ctx) => {
    const controlPlane = e.CONTROL_PLANE_URL !== undefined && e.NODE_TOKEN !== undefined;
    if (!controlPlane && e.CONFIG_FILE === undefined) {
      ctx.addIssue({ code: 'custom', path: ['CONFIG_FILE'], message: 'set CONTROL_PLANE_URL and NODE_TOKEN, or CONFIG_FILE (a JSON config snapshot)' });
    }
    if (e.CONTROL_PLANE_URL !== undefined && e.NODE_TOKEN === undefined && e.CONFIG_FILE === undefined) {
      ctx.addIssue({ code: 'custom', path: ['NODE_TOKEN'], message: 'is required with CONTROL_PLANE_URL' });
    }
  });

export type DataplaneEnv = Readonly<z.infer<typeof envSchema>>;

/** Validates the environment; throws one message listing every bad variable. */
export function parseEnv(source: Readonly<Record<string, string | undefined>>): DataplaneEnv {
  // Empty strings count as unset.
  const cleaned = Object.fromEntries(Object.entries(source).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`invalid data-plane environment:\n${lines.join('\n')}`);
  }
  return Object.freeze(parsed.data);
}

/** The process environment, validated (read once, here only). */
export const loadEnv = (): DataplaneEnv => parseEnv(process.env);

/** The schema itself, read by scripts/env-doc.ts for infra/README.md's environment table (names and defaults). */
export { envSchema as dataplaneEnvSchema };
