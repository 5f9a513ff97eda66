// What each runtime-sim variable means, for infra/README.md's environment table (scripts/env-doc.ts).
// Each variable is also a flag (`SIM_TTFT_MS` = `--ttft-ms`); a flag added to cli-options.ts without a
// line here fails infra/test/env-doc.test.ts.

/** Variable -> meaning, and the resolved option whose default the table shows (or a default in words). */
export const SIM_ENV_DOC: Readonly<Record<string, { readonly meaning: string; readonly option?: string; readonly default?: string }>> = {
  SIM_PORT: { meaning: 'port (`--port`)', default: '`8000`' },
  SIM_HOST: { meaning: 'interface (`--host`; `0.0.0.0` in a container)', default: '`127.0.0.1`' },
  SIM_MODELS: { meaning: 'served model names, comma-separated (`--model`, repeatable)', default: '`sim-model`' },
  SIM_API_KEY: { meaning: 'bearer key `/v1/*` asks for (`--api-key`); unset: none' },
  SIM_MAX_CONTEXT_LENGTH: { meaning: 'context length; longer prompts get a 400', option: 'maxContextLength' },
  SIM_TTFT_MS: { meaning: 'base time to first token, ms', option: 'ttftMs' },
  SIM_PREFILL_MS_PER_TOKEN: { meaning: 'extra prefill time per prompt token, ms', option: 'prefillMsPerToken' },
  SIM_ITL_MS: { meaning: 'inter-token latency, ms', option: 'itlMs' },
  SIM_BATCH_SLOTS: { meaning: 'concurrent generations', option: 'batchSlots' },
  SIM_MAX_QUEUE: { meaning: 'requests that may wait for a slot; beyond: 503', option: 'maxQueue' },
  SIM_COLD_START_MS: { meaning: 'after start, `/health` is 503 and requests wait this long', option: 'coldStartMs' },
  SIM_COLD_START_CAP_MS: { meaning: 'cap on the simulated cold start (0: none)', option: 'coldStartCapMs' },
  SIM_KV_CACHE_TOKENS: { meaning: 'KV cache capacity in tokens', option: 'kvCacheTokens' },
  SIM_KV_BLOCK_SIZE: { meaning: 'tokens per KV block (the unit of allocation and prefix matching)', option: 'kvBlockSize' },
  SIM_PREFILL_LANES: { meaning: 'prefills computed at once (0: unbounded)', option: 'prefillLanes' },
  SIM_ITL_PER_RUNNING_MS: { meaning: 'inter-token latency added per other running request, ms', option: 'itlPerRunningMs' },
  SIM_PREFIX_CACHING: { meaning: 'automatic prefix caching; `0` or `false` turns it off (`--no-prefix-caching`)', option: 'prefixCaching' },
  SIM_REQUEST_LOG_SIZE: { meaning: 'finished requests `/sim/stats` remembers', option: 'requestLogSize' },
  SIM_ERROR_STATUS: { meaning: 'fault: answer every chat request with this status' },
  SIM_ERROR_RATE: { meaning: 'fault: share (0 … 1) of requests answered with an error' },
  SIM_HANG_AFTER_TOKENS: { meaning: 'fault: stall forever after this many tokens' },
  SIM_CUT_AFTER_TOKENS: { meaning: 'fault: drop the connection after this many tokens' },
  SIM_SLOW_TOKEN_MS: { meaning: 'fault: extra inter-token latency, ms' },
  SIM_METRICS_ERROR_STATUS: { meaning: 'fault: answer `GET /metrics` with this status' },
  SIM_HANG: { meaning: 'fault: `true` or `1`: accept requests and never answer' },
};
