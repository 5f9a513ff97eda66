import { z } from 'zod';

const port = z.coerce.number().int().min(1).max(65535);
const schema = z.object({
  DATA_DIR: z.string().min(1).default('.data'),
  DATABASE_URL: z.string().url().optional(),
  HOST: z.string().default('127.0.0.1'),
  PUBLIC_HOST: z.string().default('localhost'),
  ADMIN_PORT: port.default(4000),
  PORT: port.default(8080),
  /** The data plane's internal /metrics listener; 0: a free port, printed in the banner. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  SIM_BASE_PORT: port.default(9100),
  SIM_TTFT_MS: z.coerce.number().min(0).default(120),
  SIM_ITL_MS: z.coerce.number().min(0).default(15),
  /** Dedicated replicas simulate their entry's Cold Start TTFT, capped at this many seconds so the demo stays quick. */
  SIM_COLD_START_CAP_SECONDS: z.coerce.number().min(0).default(3),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('warn'),
});

/** Validated, frozen settings of `pnpm start`; each bad value is named in the error. */
export function loadStartEnv(source: NodeJS.ProcessEnv = process.env) {
  const parsed = schema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`invalid environment:\n${lines.join('\n')}`);
  }
  return Object.freeze(parsed.data);
}
export type StartEnv = ReturnType<typeof loadStartEnv>;

/** The schema itself, read by scripts/env-doc.ts for infra/README.md's environment table (names and defaults). */
export { schema as startEnvSchema };
