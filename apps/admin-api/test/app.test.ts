import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends } from '@infer/db/testing';
import { DEFAULT_SUMMARY } from '@infer/shared';
import { buildAdminApp } from '../src/app.ts';
import { createCallerFactory } from '../src/trpc/init.ts';
import { createContextInner } from '../src/trpc/context.ts';
import { appRouter } from '../src/trpc/root.ts';
import { seedDemo } from '../src/seed.ts';
import { NODE_TOKEN, startTestApp, type TestApp } from './helpers.ts';

describe.each(testBackends())('admin app surfaces (%s)', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
    await seedDemo(t.database.db, { simBasePort: 19000 });
  });
  afterAll(async () => t?.close());

  it('answers /healthz and JSON 404s', async () => {
    expect(await (await fetch(`${t.baseUrl}/healthz`)).json()).toEqual({ status: 'ok' });
    const res = await fetch(`${t.baseUrl}/nope`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });

  it('answers 404 for an unknown route whatever its body (an empty or malformed JSON body is not a 400 there)', async () => {
    const json = { 'content-type': 'application/json' };
    for (const [method, path, body] of [
      ['DELETE', '/api/keys/1', undefined],
      ['POST', '/nope?x=1', '{"a": '],
      ['PUT', '/internal/v1/nope', ''],
    ] as const) {
      const res = await fetch(`${t.baseUrl}${path}`, { method, headers: json, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await res.json()).toMatchObject({ error: { code: 'not_found', message: `Route ${method} ${path.split('?')[0]} not found.` } });
    }
    // A known route still answers for its body.
    const known = await fetch(`${t.baseUrl}/internal/v1/usage`, {
      method: 'POST',
      headers: { ...json, authorization: `Bearer ${NODE_TOKEN}` },
      body: '{"a": ',
    });
    expect(known.status).toBe(400);
    expect(((await known.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
  });

  it('serves GraphQL endpoints with spec string forms and pagination', async () => {
    const query = `query($f: EndpointFilter, $first: Int, $after: String) {
      endpoints(filter: $f, first: $first, after: $after) {
        totalCount edges { cursor node { name provider parameterSize gpuCount contextLength concurrency coldStartTtft
          tokenPrice recommendedUseCases summary detailedIntro tags } }
        pageInfo { hasNextPage hasPreviousPage endCursor }
      }
      phi: endpoint(name: "Phi-4") { summary parameterSize }
    }`;
    const gql = async (variables: object) => {
      const res = await fetch(`${t.baseUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      });
      expect(res.status).toBe(200);
      return (await res.json()) as { data: any; errors?: unknown[] };
    };
    const page1 = await gql({ first: 3 });
    expect(page1.errors).toBeUndefined();
    expect(page1.data.endpoints.totalCount).toBeGreaterThanOrEqual(7);
    expect(page1.data.endpoints.edges).toHaveLength(3);
    expect(page1.data.endpoints.pageInfo.hasNextPage).toBe(true);
    expect(page1.data.phi).toEqual({ summary: DEFAULT_SUMMARY, parameterSize: '' });
    const page2 = await gql({ first: 3, after: page1.data.endpoints.pageInfo.endCursor });
    expect(page2.data.endpoints.pageInfo.hasPreviousPage).toBe(true);
    expect(page2.data.endpoints.edges[0].node.name).not.toBe(page1.data.endpoints.edges[0].node.name);

    const coding = await gql({ f: { tag: 'cursor' } });
    const names = coding.data.endpoints.edges.map((e: { node: { name: string } }) => e.node.name);
    expect(names).toContain('Qwen2.5-Coder-32B-Instruct');
    const bad = await gql({ after: 'garbage' });
    expect(bad.errors).toEqual([expect.objectContaining({ message: 'after is not a valid cursor' })]);
    const llama = (await gql({ f: { search: 'llama' } })).data.endpoints.edges[0].node;
    expect(llama).toMatchObject({ name: 'Llama-3.3-70B-Instruct', parameterSize: '70B', concurrency: '8x', coldStartTtft: '45 sec', gpuCount: 4 });
  });

  it('serves tRPC catalog.list over HTTP and via createContextInner', async () => {
    const res = await fetch(`${t.baseUrl}/trpc/catalog.list?input=${encodeURIComponent(JSON.stringify({ provider: 'google' }))}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result: { data: { name: string; offeredDedicated: boolean }[] } };
    expect(body.result.data.map((e) => e.name)).toEqual(['gemma-3-27b-it']);

    const caller = createCallerFactory(appRouter)(
      await createContextInner({ db: t.database.db, publicUrls: { sharedBaseUrl: 'http://x/endpoints/v1', dataplaneUrl: 'http://x' } }),
    );
    const all = await caller.catalog.list();
    expect(all.length).toBeGreaterThanOrEqual(7);
    expect(all.find((e) => e.name === 'Phi-4')?.summary).toBe(DEFAULT_SUMMARY);
  });
});

describe('console static files', () => {
  it('serves webRoot with SPA fallback, but JSON 404 for API paths', async () => {
    const webRoot = mkdtempSync(join(tmpdir(), 'admin-web-'));
    writeFileSync(join(webRoot, 'index.html'), '<!doctype html><title>console</title>');
    writeFileSync(join(webRoot, 'app.js'), 'console.log(1)');
    const database = await createTestDb('pglite');
    const app = await buildAdminApp({
      db: database.db,
      dbKind: 'pglite',
      nodeToken: NODE_TOKEN,
      webRoot,
      publicUrls: { sharedBaseUrl: 'http://x/endpoints/v1', dataplaneUrl: 'http://x' },
    });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      expect(await (await fetch(`${base}/`)).text()).toContain('console');
      expect(await (await fetch(`${base}/app.js`)).text()).toContain('console.log');
      const deep = await fetch(`${base}/endpoints/Phi-4`);
      expect(deep.headers.get('content-type')).toMatch(/text\/html/);
      expect(await deep.text()).toContain('console');
      const api = await fetch(`${base}/internal/v1/nope`, { headers: { authorization: `Bearer ${NODE_TOKEN}` } });
      expect(api.status).toBe(404);
      expect(api.headers.get('content-type')).toMatch(/json/);
    } finally {
      await app.close();
      await database.close();
    }
  });
});
