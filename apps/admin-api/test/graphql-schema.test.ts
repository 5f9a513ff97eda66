import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { expect, it } from 'vitest';
import { schema } from '../src/graphql/schema/index.ts';

// Load graphql the way Node (and Pothos) does; Vite would pick its .mjs build, a second instance.
const { printSchema } = createRequire(import.meta.url)('graphql') as typeof import('graphql');

it('matches the committed schema.graphql (run `pnpm --filter @infer/admin-api print-schema` after changes)', () => {
  const committed = readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8');
  expect(`${printSchema(schema)}\n`).toBe(committed);
});

it('keeps the names integrators depend on', () => {
  const sdl = printSchema(schema);
  expect(sdl).toContain('endpoints(after: String, filter: EndpointFilter, first: Int): EndpointConnection!');
  expect(sdl).toContain('endpoint(name: String!): Endpoint');
  expect(sdl).toMatch(/catalogFacets: CatalogFacets!/);
  const endpoint = schema.getType('Endpoint') as import('graphql').GraphQLObjectType;
  const fields = Object.keys(endpoint.getFields());
  for (const f of [
    'name',
    'provider',
    'parameterSize',
    'gpuCount',
    'contextLength',
    'concurrency',
    'coldStartTtft',
    'tokenPrice',
    'recommendedUseCases',
    'summary',
    'detailedIntro',
    'tags',
    'integration',
  ]) {
    expect(fields).toContain(f);
  }
  const integration = schema.getType('Integration') as import('graphql').GraphQLObjectType;
  expect(Object.keys(integration.getFields())).toEqual(expect.arrayContaining(['apiBaseUrl', 'modelName', 'apiKey', 'snippets']));
  // No field anywhere is a hash; the only secrets are the ones createApiKey and createNodeCredential return once.
  const fieldNames = Object.values(schema.getTypeMap()).flatMap((t) =>
    'getFields' in t && !t.name.startsWith('__') ? Object.keys(t.getFields()).map((f) => `${t.name}.${f}`) : [],
  );
  expect(fieldNames.filter((f) => /hash/i.test(f))).toEqual([]);
  expect(fieldNames.filter((f) => /secret/i.test(f)).sort()).toEqual(['CreatedApiKey.secret', 'CreatedNodeCredential.secret']);
});
