// `pnpm --filter @infer/admin-api print-schema`: writes the committed apps/admin-api/schema.graphql.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { printSchema } from 'graphql';
import { schema } from './schema/index.ts';

const target = fileURLToPath(new URL('../../schema.graphql', import.meta.url));
writeFileSync(target, `${printSchema(schema)}\n`);
console.log(`wrote ${target}`);
