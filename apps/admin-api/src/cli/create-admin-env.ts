import { z } from 'zod';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

// The same database variables as the server (env.ts), without what only a serving process needs (NODE_TOKEN).
const schema = z.object({
  DATABASE_URL: optionalString.pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  DATA_DIR: z.string().min(1).default('.data'),
  ADMIN_PASSWORD: optionalString,
});

export type CreateAdminEnv = Readonly<z.infer<typeof schema>>;

/** The environment of `admin:create`, validated; throws one message naming every bad variable (never a value). */
export function loadCreateAdminEnv(source: Readonly<Record<string, string | undefined>> = process.env): CreateAdminEnv {
  const parsed = schema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`invalid admin:create environment:\n${lines.join('\n')}`);
  }
  return Object.freeze(parsed.data);
}
