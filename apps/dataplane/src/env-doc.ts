// What each data-plane variable means, for infra/README.md's environment table (scripts/env-doc.ts).
// Names and defaults come from the schema in env.ts; a variable added there without a line here fails
// infra/test/env-doc.test.ts, so the table cannot drift.

/** Meaning of a variable, and a default in words where the schema's own default is computed or absent. */
export interface EnvVarDoc {
  readonly meaning: string;
  readonly default?: string;
}

export const DATAPLANE_ENV_DOC: Readonly<Record<string, EnvVarDoc>> = {
  PORT: { meaning: 'public port (inference API, `/healthz`, `/readyz`)' },
  HOST: { meaning: 'interface the node listens on (`0.0.0.0` in a container)' },
  LISTEN_BACKLOG: {
    meaning:
      'accept queue of the public port; capped by the kernel’s `net.core.somaxconn`. Node’s own default, 511, drops connects (retried by clients after 1 s) when a thousand arrive at once',
  },
  CONTROL_PLANE_URL: { meaning: 'control plane the node streams its config from and bills usage to', default: 'required unless `CONFIG_FILE`' },
  NODE_TOKEN: { meaning: 'the control plane’s `NODE_TOKEN`, or a per-node credential (`infn_…`)', default: 'required with `CONTROL_PLANE_URL`' },
  CONFIG_FILE: { meaning: 'a static JSON config snapshot: serve without a control plane (nothing is billed)' },
  SNAPSHOT_FILE: { meaning: 'persist the last config snapshot here; reloaded at start so a restart without the control plane still serves' },
  USAGE_FLUSH_MS: { meaning: 'usage records are sent to the control plane this often' },
  USAGE_SPOOL_DIR: {
    meaning: 'durable usage spool (written before a record counts, replayed at start); give each node its own',
    default: '`.data/dataplane-usage-<PORT>` under the working directory',
  },
  USAGE_FSYNC_MS: { meaning: 'group-commit interval of the spool’s fdatasync' },
  SHUTDOWN_DRAIN_MS: {
    meaning:
      'after SIGTERM, requests in flight may finish this long; then streams end with an error event and waiting answers with a 503, each billed what the client got, and a request whose body is still coming has its connection closed. The process exits at most 5 s later (7 s when a connection still holds it up: a last bounded usage flush first): give the pod that much more grace',
  },
  BODY_LIMIT_BYTES: { meaning: 'largest request body; beyond it 413' },
  CONNECT_TIMEOUT_MS: { meaning: 'connect timeout to a runtime' },
  FIRST_BYTE_TIMEOUT_MS: { meaning: 'time a runtime may take to the first byte of a streamed answer (504, or an error event mid-stream)' },
  RESPONSE_TIMEOUT_MS: {
    meaning: 'time a runtime may take to a non-streamed answer, which it sends only once it is generated in full (504)',
  },
  IDLE_TIMEOUT_MS: { meaning: 'longest silence between two chunks of a runtime’s answer' },
  EJECT_AFTER_FAILURES: { meaning: 'consecutive failures that eject a replica (outlier detection)' },
  EJECT_COOLDOWN_MS: { meaning: 'first ejection’s length; each next one doubles, up to 5 min' },
  ALLOWED_PRIVATE_CIDRS: { meaning: 'comma-separated non-public CIDRs tenants’ external runtimes may be dialled at; unset: public addresses only' },
  UPSTREAM_MAX_RETRIES: { meaning: 'retries on another replica before any byte reached the client (0 … 5)' },
  DEFAULT_RPM_LIMIT: { meaning: 'requests per minute of each tenant that sets none (all its keys together); unset: unlimited' },
  DEFAULT_TPM_LIMIT: { meaning: 'tokens per minute of each tenant that sets none (all its keys together); unset: unlimited' },
  DEFAULT_COMPLETION_TOKENS: { meaning: 'tokens reserved for a request without `max_tokens`' },
  REPLICA_BASE_CONCURRENCY: { meaning: 'requests a replica takes at once, times the entry’s Concurrency multiplier' },
  QUEUE_MAX: { meaning: 'requests that may wait for a replica slot; beyond: 429' },
  QUEUE_TIMEOUT_MS: { meaning: 'longest wait in that queue; then 503' },
  REDIS_URL: { meaning: 'Redis shared by every node: RPM/TPM windows and replica concurrency hold fleet-wide; unset: per node' },
  REDIS_KEY_PREFIX: { meaning: 'prefix of every Redis key (one per platform sharing a Redis)' },
  METRICS_PORT: { meaning: 'port of the internal Prometheus `/metrics` listener (0: any free port); never the public port' },
  METRICS_HOST: { meaning: 'interface of the metrics listener (`0.0.0.0` for an in-cluster scraper)' },
  METRICS_TOKEN: { meaning: 'bearer token the metrics listener asks for; unset: none' },
  NODE_ID: { meaning: 'the node’s name in wakes and load reports', default: '`<hostname>-<PORT>`' },
  SCALE_HOLD_QUEUE_MAX: { meaning: 'requests held per scaled-to-zero deployment on this node while it wakes; beyond: 429' },
  SCALE_HOLD_MIN_MS: { meaning: 'lower bound of the hold deadline (2 × the entry’s expected cold start, stated or measured, by default)' },
  SCALE_HOLD_MAX_MS: { meaning: 'upper bound of the hold deadline' },
  LOAD_REPORT_MS: { meaning: 'load reports and cold-start progress comments are sent this often' },
  WAKE_RESEND_MS: { meaning: 'a wake is re-sent this often while requests stay held' },
  HTTP_FRONT: {
    meaning:
      "`on`: the node's own HTTP/1.1 front reads plain chat requests (src/front); any other request hands its connection to Node's HTTP server. `off`: Node's server reads every request (a switch for an operator who suspects the front)",
  },
  LOG_LEVEL: { meaning: '`fatal` … `trace`, or `silent`' },
  ROUTING_POLICY: {
    meaning:
      'replica choice: `scorer` (runtime metrics: queue, KV cache, prefix affinity), `least_in_flight`, `round_robin` or `random` (an entry or deployment may set its own)',
  },
  ROUTING_SCRAPE_MS: { meaning: 'how often each replica’s `/metrics` is scraped for the scorer' },
  ROUTING_STALE_MS: { meaning: 'metrics older than this count as stale (the scorer falls back to least in flight)' },
  ROUTING_HOLD_MS: { meaning: 'how long a request waits for a saturated target before a 429 (0: at once)' },
};
