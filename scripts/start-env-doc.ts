// What each `pnpm start` variable means, for infra/README.md's environment table (scripts/env-doc.ts).
// Names and defaults come from the schema in start-env.ts; a variable added there without a line here
// fails infra/test/env-doc.test.ts.

export const START_ENV_DOC: Readonly<Record<string, { readonly meaning: string; readonly default?: string }>> = {
  DATA_DIR: { meaning: 'embedded database, node token, `demo.env`, the data plane’s snapshot file (folders 0700, files 0600)' },
  DATABASE_URL: { meaning: 'use this PostgreSQL instead of embedded PGlite' },
  HOST: { meaning: 'interface every process listens on' },
  PUBLIC_HOST: { meaning: 'host name printed in URLs' },
  ADMIN_PORT: { meaning: 'control plane and console' },
  PORT: { meaning: 'data-plane node' },
  METRICS_PORT: {
    meaning:
      'the data plane’s internal Prometheus `/metrics` listener on HOST (0: a free port); printed in the banner. No token unless `METRICS_TOKEN` is set: set one with HOST=0.0.0.0',
  },
  SIM_BASE_PORT: { meaning: 'first port of the simulated runtimes (seeded once into the catalog)' },
  SIM_TTFT_MS: { meaning: 'simulated time to first token' },
  SIM_ITL_MS: { meaning: 'simulated inter-token latency' },
  SIM_COLD_START_CAP_SECONDS: { meaning: 'dedicated replicas simulate their entry’s Cold Start TTFT, capped at this many seconds so the demo stays quick' },
  LOG_LEVEL: { meaning: '`fatal` … `trace`, or `silent`' },
};
