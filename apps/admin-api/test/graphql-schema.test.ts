import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { expect, it } from 'vitest';
import { schema } from '../src/graphql/schema/index.ts';

// Load graphql the way Node (and Pothos) does; Vite would pick its .mjs build, a second instance.
const { printSchema } = createRequire(import.meta.url)('graphql') as typeof import('graphql');

it('matches the committed schema.graphql (run `pnpm --filter @infer/admin-api print-schema` after changes)', () => {
  const committed = readFileSync(new URL('../src/graphql/schema.graphql', import.meta.url), 'utf8');
  expect(`${printSchema(schema)}\n`).toBe(committed);
});
