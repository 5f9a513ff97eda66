import { z } from 'zod';

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
  NODE_TOKEN: z.string({ error: 'NODE_TOKEN is required (the shared secret of data-plane nodes)' }).min(16, 'NODE_TOKEN must be at least 16 characters'),
  DATAPLANE_URL: optionalUrl,
  SHARED_BASE_URL: optionalUrl,
  WEB_ROOT: optionalString,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export interface AdminEnv {
  readonly ADMIN_HOST: string;
  readonly ADMIN_PORT: number;
  readonly DATABASE_URL: string | undefined;
  readonly DATA_DIR: string;
  readonly NODE_TOKEN: string;
  readonly DATAPLANE_URL: string;
  readonly SHARED_BASE_URL: string;
  readonly WEB_ROOT: string | undefined;
  readonly LOG_LEVEL: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** Reads and validates the environment once; throws one message naming every bad variable. */
export function loadEnv(source: Readonly<Record<string, string | undefined>> = process.env): AdminEnv {
  const parsed = schema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`Invalid admin-api environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const dataplaneUrl = (e.DATAPLANE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  return Object.freeze({
    ...e,
    DATABASE_URL: e.DATABASE_URL,
    DATAPLANE_URL: dataplaneUrl,
    SHARED_BASE_URL: (e.SHARED_BASE_URL ?? `${dataplaneUrl}/endpoints/v1`).replace(/\/+$/, ''),
  });
}
