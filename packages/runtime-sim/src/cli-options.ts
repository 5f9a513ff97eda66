import { parseArgs } from 'node:util';
import { resolveSimOptions, type ResolvedSimOptions } from './options.ts';

export interface CliConfig {
  readonly port: number;
  readonly host: string;
  readonly options: ResolvedSimOptions;
  readonly help: boolean;
}

// flag -> [env var, option name, kind]
const NUMERIC = {
  'max-context-length': ['SIM_MAX_CONTEXT_LENGTH', 'maxContextLength'],
  'ttft-ms': ['SIM_TTFT_MS', 'ttftMs'],
  'prefill-ms-per-token': ['SIM_PREFILL_MS_PER_TOKEN', 'prefillMsPerToken'],
  'itl-ms': ['SIM_ITL_MS', 'itlMs'],
  'batch-slots': ['SIM_BATCH_SLOTS', 'batchSlots'],
  'max-queue': ['SIM_MAX_QUEUE', 'maxQueue'],
  'cold-start-ms': ['SIM_COLD_START_MS', 'coldStartMs'],
  'cold-start-cap-ms': ['SIM_COLD_START_CAP_MS', 'coldStartCapMs'],
  'kv-cache-tokens': ['SIM_KV_CACHE_TOKENS', 'kvCacheTokens'],
  'kv-block-size': ['SIM_KV_BLOCK_SIZE', 'kvBlockSize'],
  'prefill-lanes': ['SIM_PREFILL_LANES', 'prefillLanes'],
  'itl-per-running-ms': ['SIM_ITL_PER_RUNNING_MS', 'itlPerRunningMs'],
  'request-log-size': ['SIM_REQUEST_LOG_SIZE', 'requestLogSize'],
} as const;
const FAULTS = {
  'error-status': ['SIM_ERROR_STATUS', 'errorStatus'],
  'error-rate': ['SIM_ERROR_RATE', 'errorRate'],
  'hang-after-tokens': ['SIM_HANG_AFTER_TOKENS', 'hangAfterTokens'],
  'cut-after-tokens': ['SIM_CUT_AFTER_TOKENS', 'cutAfterTokens'],
  'slow-token-ms': ['SIM_SLOW_TOKEN_MS', 'slowTokenMs'],
  'metrics-error-status': ['SIM_METRICS_ERROR_STATUS', 'metricsErrorStatus'],
} as const;

export const CLI_USAGE = `Usage: runtime-sim [flags]   (each flag also reads SIM_<FLAG> from the environment)
  --port N (SIM_PORT, 8000)   --host H (SIM_HOST, 127.0.0.1)
  --model NAME (repeatable; SIM_MODELS=a,b; default sim-model)   --api-key KEY (SIM_API_KEY)
  ${Object.keys(NUMERIC)
    .map((f) => `--${f} N`)
    .join('  ')}
  faults: ${Object.keys(FAULTS)
    .map((f) => `--${f} N`)
    .join('  ')}  --hang  --no-prefix-caching (SIM_PREFIX_CACHING=0)`;

function toNumber(flag: string, raw: string): number {
  const n = Number(raw.trim());
  if (raw.trim() === '' || !Number.isFinite(n)) throw new TypeError(`--${flag} must be a number, got "${raw}"`);
  return n;
}

/** Parses CLI flags with `SIM_*` environment variables as defaults; throws a TypeError on bad values. */
export function parseCliOptions(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CliConfig {
  const stringFlags = [...Object.keys(NUMERIC), ...Object.keys(FAULTS), 'port', 'host', 'api-key'];
  const { values: parsed } = parseArgs({
    args: [...argv],
    strict: true,
    allowPositionals: false,
    options: {
      ...Object.fromEntries(stringFlags.map((f) => [f, { type: 'string' as const }])),
      model: { type: 'string', multiple: true },
      hang: { type: 'boolean' },
      'no-prefix-caching': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const values: Record<string, unknown> = parsed;
  const str = (flag: string, envName: string): string | undefined => {
    const v = values[flag];
    return typeof v === 'string' ? v : env[envName] || undefined;
  };
  const options: Record<string, unknown> = {};
  for (const [flag, [envName, key]] of Object.entries(NUMERIC)) {
    const raw = str(flag, envName);
    if (raw !== undefined) options[key] = toNumber(flag, raw);
  }
  const faults: Record<string, unknown> = {};
  for (const [flag, [envName, key]] of Object.entries(FAULTS)) {
    const raw = str(flag, envName);
    if (raw !== undefined) faults[key] = toNumber(flag, raw);
  }
  const hangEnv = env['SIM_HANG'];
  if (values['hang'] === true || hangEnv === '1' || hangEnv === 'true') faults['hang'] = true;
  const prefixEnv = env['SIM_PREFIX_CACHING'];
  if (values['no-prefix-caching'] === true || prefixEnv === '0' || prefixEnv === 'false') options['prefixCaching'] = false;
  const modelFlags = values['model'];
  const models =
    Array.isArray(modelFlags) && modelFlags.length > 0
      ? modelFlags
      : (env['SIM_MODELS'] ?? '')
          .split(',')
          .map((m) => m.trim())
          .filter((m) => m.length > 0);
  if (models.length > 0) options['models'] = models;
  options['apiKey'] = str('api-key', 'SIM_API_KEY') ?? null;
  options['faults'] = faults;

  const port = toNumber('port', str('port', 'SIM_PORT') ?? '8000');
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new TypeError(`--port must be 0..65535, got ${port}`);
  return Object.freeze({
    port,
    host: str('host', 'SIM_HOST') ?? '127.0.0.1',
    options: resolveSimOptions(options),
    help: values['help'] === true,
  });
}

/** Flag -> [environment variable, option] tables, read by scripts/env-doc.ts for infra/README.md's environment table. */
export { NUMERIC as SIM_NUMERIC_FLAGS, FAULTS as SIM_FAULT_FLAGS };
