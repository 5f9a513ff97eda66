// What each control-plane variable means, for infra/README.md's environment table (scripts/env-doc.ts).
// Names and defaults come from the schema in env.ts; a variable added there without a line here fails
// infra/test/env-doc.test.ts, so the table cannot drift.

/** Meaning of a variable, and a default in words where the schema's own default is computed or absent. */
export interface EnvVarDoc {
  readonly meaning: string;
  readonly default?: string;
}

export const ADMIN_ENV_DOC: Readonly<Record<string, EnvVarDoc>> = {
  ADMIN_HOST: { meaning: 'interface the control plane listens on (`0.0.0.0` in a container)' },
  ADMIN_PORT: { meaning: 'port of the control plane: console, GraphQL, tRPC, the node channel, usage ingest, health' },
  DATABASE_URL: { meaning: 'PostgreSQL to use (`postgres://user:pass@host:5432/db`); unset: embedded PGlite in `DATA_DIR` (one process only)' },
  DATA_DIR: { meaning: 'PGlite data and, without `SECRETS_ENCRYPTION_KEY`, the generated `secrets.key` (folders 0700, files 0600)' },
  NODE_TOKEN: {
    meaning:
      'bootstrap secret data-plane nodes may present (at least 16 characters); unset: only per-node credentials (`infn_…`) are accepted, the production setting once every node has its own',
  },
  SECRETS_ENCRYPTION_KEY: {
    meaning: 'keyring sealing upstream API keys at rest: `<id>:<base64 of 32 bytes>`, newest first, comma-separated; the same on every replica',
    default: '`DATA_DIR/secrets.key`',
  },
  DATAPLANE_URL: { meaning: 'public base URL of the data plane, shown to users in dedicated URLs', default: '`http://127.0.0.1:8080`' },
  SHARED_BASE_URL: { meaning: 'public shared base URL shown to users', default: '`DATAPLANE_URL/endpoints/v1`' },
  WEB_ROOT: { meaning: 'folder of the built console (`apps/web/dist`) to serve; unset: API only' },
  LOG_LEVEL: { meaning: '`fatal` … `trace`, or `silent`' },
  CONSOLE_ORIGINS: { meaning: 'other origins (comma-separated) allowed to send cookie-authenticated mutations (CSRF allow-list)' },
  LOCAL_SIM_TTFT_MS: { meaning: 'time to first token of the simulated replicas the `local` provisioner starts' },
  LOCAL_SIM_ITL_MS: { meaning: 'inter-token latency of those simulated replicas' },
  LOCAL_COLD_START_CAP_MS: { meaning: 'cap on the simulated cold start (the entry’s Cold Start TTFT) of local replicas' },
  EXTERNAL_ALLOW_PRIVATE_URLS: { meaning: '`true`: tenants may register and the probes reach any address (development only)' },
  ALLOWED_PRIVATE_CIDRS: { meaning: 'comma-separated non-public CIDRs external runtimes may use anyway (a peered VPC)' },
  OUTBOX_RETAIN_ROWS: { meaning: 'config outbox rows kept (the newest is always kept)' },
  OUTBOX_RETAIN_HOURS: { meaning: 'config outbox rows older than this are pruned (0: no age limit)' },
  OUTBOX_PRUNE_INTERVAL_S: { meaning: 'seconds between outbox prunes (0: never prune); a node resuming from a pruned version gets a full snapshot' },
  OUTBOX_POLL_MS: { meaning: 'outbox poll, the fallback when a NOTIFY is missed or the LISTEN connection is down' },
  METRICS_TOKEN: { meaning: 'bearer token for `GET /metrics` (at least 16 characters); unset: `/metrics` is not served' },
  TRUST_PROXY: {
    meaning:
      'proxies whose X-Forwarded-For/Host/Proto are believed: `true` (any), a hop count, or addresses/CIDRs (comma-separated; also `loopback`, `linklocal`, `uniquelocal`); set it behind a load balancer',
    default: '`false`',
  },
  API_STATEMENT_TIMEOUT_MS: { meaning: 'PostgreSQL statement_timeout of tRPC and GraphQL queries (0: none)' },
  API_POINTS_PER_MINUTE: { meaning: 'work budget per caller per minute on tRPC and GraphQL (one point a call, GraphQL one per 25 fields)' },
  AUTOSCALER_ENABLED: { meaning: 'serverless autoscaler; `false`: replicas follow the counts set by API calls and wakes' },
  AUTOSCALER_TICK_MS: { meaning: 'autoscaler decision interval' },
  AUTOSCALER_STABLE_WINDOW_S: { meaning: 'autoscaler stable window (average concurrency over it sets the replica count)' },
  AUTOSCALER_PANIC_WINDOW_S: { meaning: 'autoscaler panic window (short window for bursts)' },
  AUTOSCALER_PANIC_THRESHOLD: { meaning: 'panic mode when the panic window wants this many times the current replicas' },
  LOAD_REPORT_TTL_S: { meaning: 'a node’s load report counts this long' },
  GPU_LEDGER_HEARTBEAT_MS: { meaning: 'GPU-time ledger heartbeat: at most this much replica time is lost when the leader dies' },
  REPLICA_START_TIMEOUT_S: { meaning: 'a replica not ready this long after its cold start is replaced' },
  REPLICA_START_ATTEMPTS: { meaning: 'failed starts in a row before a deployment stops retrying and reports why' },
  REPLICA_START_BACKOFF_MS: { meaning: 'wait before the next start after a failed one, doubled with each failure in a row (at most 30 s)' },
  REPLICA_DRAIN_TIMEOUT_S: { meaning: 'longest wait for a draining replica’s in-flight requests' },
  REPLICA_BASE_CONCURRENCY: {
    meaning: 'the data plane’s `REPLICA_BASE_CONCURRENCY` (keep equal): default target concurrency = this × the entry’s Concurrency',
  },
  K8S_NAMESPACE: { meaning: 'Kubernetes provisioner: the namespace its runtime Deployments and Services live in; unset: no Kubernetes provisioner' },
  KUBECONFIG: { meaning: 'kubeconfig file for the Kubernetes provisioner; unset: the pod’s service account (in-cluster)' },
  KUBERNETES_SERVICE_HOST: { meaning: 'set by Kubernetes inside a pod (not by you): tells that in-cluster credentials exist' },
  K8S_VLLM_IMAGE: { meaning: 'default vLLM image of Kubernetes replicas (a catalog entry’s runtime config overrides it)' },
  K8S_SGLANG_IMAGE: { meaning: 'default SGLang image of Kubernetes replicas' },
  K8S_TGI_IMAGE: { meaning: 'default TGI image of Kubernetes replicas' },
  K8S_DRAIN_SECONDS: { meaning: 'seconds a stopping runtime pod keeps serving requests in flight (terminationGracePeriodSeconds = this + 5 s preStop)' },
  K8S_REPLICA_ADDRESS: { meaning: 'replica addresses in the routing snapshot: each pod’s IP (`pod`) or the Service’s cluster DNS name (`service`)' },
  K8S_UNSCHEDULABLE_GRACE_S: { meaning: 'how long a runtime pod may stay unschedulable (waiting for a cluster autoscaler) before its start fails' },
};
