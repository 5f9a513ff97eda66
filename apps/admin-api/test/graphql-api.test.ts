import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp } from '../src/app.ts';
import { issueAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import { createEntry, type CreateEntryInput } from '../src/modules/catalog/catalog.service.ts';
import type { Provisioner } from '../src/modules/deployments/provisioners/provisioner.ts';
import { addMember, createTenant } from '../src/modules/tenants/tenants.service.ts';
import { NODE_TOKEN } from './helpers.ts';

const SHARED = 'http://shared.test/endpoints/v1';
const DATAPLANE = 'http://dp.test';

/** A provisioner that "starts" replicas at once, so deployments reach running without processes. */
const instant: Provisioner = Object.freeze<Provisioner>({
  kind: 'local' as const,
  billsGpuTime: true,
  start: async (spec) => ({ url: `http://127.0.0.1:1/${spec.deploymentId}`, kind: 'sim' as const, servedModel: spec.servedModel }),
  stop: async () => {},
  health: async () => true,
});

const ENTRIES: CreateEntryInput[] = [
  {
    name: 'Llama-3.3-70B-Instruct',
    provider: 'Meta',
    parameterSizeB: 70,
    gpuCount: 4,
    contextLength: 131072,
    concurrency: 8,
    coldStartSeconds: 45,
    priceInputPerM: 0.59,
    priceOutputPerM: 0.79,
    useCases: ['Chat', 'Reasoning'],
    summary: 'Strong chat.',
    detailedIntro: 'Long intro.',
    tags: ['chat', 'cline'],
    offeredShared: true,
    offeredDedicated: true,
    published: true,
  },
  {
    name: 'Qwen2.5-Coder-32B',
    provider: 'Qwen',
    parameterSizeB: 32,
    useCases: ['Coding'],
    tags: ['coding', 'cline'],
    offeredShared: true,
    offeredDedicated: true,
    published: true,
  },
  {
    name: 'DeepSeek-V3',
    provider: 'deepseek-ai',
    useCases: ['Chat', 'Coding'],
    tags: ['chat', 'coding'],
    offeredShared: true,
    offeredDedicated: false,
    published: true,
  },
  { name: 'Mistral-Small-24B', provider: 'mistralai', useCases: ['Chat'], tags: ['chat'], offeredShared: true, offeredDedicated: true, published: true },
  { name: 'gemma-3-27b-it', provider: 'google', useCases: ['Chat'], tags: ['chat'], offeredShared: false, offeredDedicated: true, published: true },
  { name: 'Phi-4', provider: 'microsoft', tags: ['small'], offeredShared: true, offeredDedicated: true, published: true },
  { name: 'Hidden-Model', provider: 'Meta', tags: ['chat'], useCases: ['Chat'], offeredShared: true, offeredDedicated: true, published: false },
];

interface GqlResult {
  status: number;
  data?: Record<string, any> | null;
  errors?: { message: string; extensions?: { code?: string; param?: string | null } }[];
  text: string;
}

interface Caller {
  cookie?: string;
  bearer?: string;
}

type Actor = 'anonymous' | 'memberA' | 'ownerA' | 'memberB' | 'admin' | 'platformToken' | 'tokenA' | 'tokenB';
const ACTORS: readonly Actor[] = ['anonymous', 'memberA', 'ownerA', 'memberB', 'admin', 'platformToken', 'tokenA', 'tokenB'];

describe.each(testBackends())('GraphQL API over HTTP (%s)', (kind) => {
  let database: TestDatabase;
  let app: FastifyInstance;
  let baseUrl: string;
  const callers = {} as Record<Actor, Caller>;
  let tenantA: { id: string; slug: string };
  let tenantB: { id: string; slug: string };
  let deploymentA: string;
  let keyA: { id: string; secret: string };

  async function gql(caller: Caller, query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}): Promise<GqlResult> {
    const h: Record<string, string> = { 'content-type': 'application/json', ...headers };
    if (caller.cookie) {
      h['cookie'] = `session=${caller.cookie}`;
      h['origin'] ??= baseUrl;
    }
    if (caller.bearer) h['authorization'] = `Bearer ${caller.bearer}`;
    const res = await fetch(`${baseUrl}/graphql`, { method: 'POST', headers: h, body: JSON.stringify({ query, variables }) });
    const text = await res.text();
    const body = JSON.parse(text) as Omit<GqlResult, 'status' | 'text'>;
    return { status: res.status, ...body, text };
  }

  /** 'ok' or the first error's code. */
  const outcome = (r: GqlResult): string => (r.errors?.length ? (r.errors[0]?.extensions?.code ?? r.errors[0]?.message ?? 'error') : 'ok');

  beforeAll(async () => {
    database = await createTestDb(kind);
    const db = database.db;
    app = await buildAdminApp({
      db,
      dbKind: database.kind,
      pgPool: database.pool,
      nodeToken: NODE_TOKEN,
      publicUrls: { sharedBaseUrl: SHARED, dataplaneUrl: DATAPLANE },
      provisioners: { local: instant },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

    for (const e of ENTRIES) await createEntry(db, e);
    const a = await createTenant(db, { slug: 'acme', name: 'Acme' });
    const b = await createTenant(db, { slug: 'bravo', name: 'Bravo' });
    tenantA = { id: a.id, slug: a.slug };
    tenantB = { id: b.id, slug: b.slug };

    const user = async (email: string, isPlatformAdmin = false) => createUser(db, { email, password: 'password-123', isPlatformAdmin });
    const memberA = await user('member-a@example.com');
    const ownerA = await user('owner-a@example.com');
    const memberB = await user('member-b@example.com');
    const admin = await user('admin@example.com', true);
    await addMember(db, { tenantId: a.id, userId: memberA.id, role: 'member' });
    await addMember(db, { tenantId: a.id, userId: ownerA.id, role: 'owner' });
    await addMember(db, { tenantId: b.id, userId: memberB.id, role: 'owner' }); // even B's owner sees nothing of A
    callers.anonymous = {};
    callers.memberA = { cookie: (await createSession(db, memberA.id)).token };
    callers.ownerA = { cookie: (await createSession(db, ownerA.id)).token };
    callers.memberB = { cookie: (await createSession(db, memberB.id)).token };
    callers.admin = { cookie: (await createSession(db, admin.id)).token };
    callers.platformToken = { bearer: (await issueAdminToken(db, { name: 'infra', tenantId: null })).secret };
    callers.tokenA = { bearer: (await issueAdminToken(db, { name: 'acme-ci', tenantId: a.id })).secret };
    callers.tokenB = { bearer: (await issueAdminToken(db, { name: 'bravo-ci', tenantId: b.id })).secret };

    const dep = await gql(callers.ownerA, `mutation($t: ID!) { deployEndpoint(tenantId: $t, endpointName: "Llama-3.3-70B-Instruct") { id state } }`, {
      t: a.id,
    });
    expect(dep.errors).toBeUndefined();
    deploymentA = dep.data!.deployEndpoint.id;
    const key = await gql(callers.ownerA, `mutation($t: ID!) { createApiKey(tenantId: $t, name: "ci") { key { id } secret } }`, { t: a.id });
    keyA = { id: key.data!.createApiKey.key.id, secret: key.data!.createApiKey.secret };
  });

  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  describe('public catalog', () => {
    const page = `query($filter: EndpointFilter, $first: Int, $after: String) {
      endpoints(filter: $filter, first: $first, after: $after) {
        totalCount edges { cursor node { name } } pageInfo { hasNextPage hasPreviousPage endCursor }
      }
    }`;
    const names = (r: GqlResult) => r.data!.endpoints.edges.map((e: { node: { name: string } }) => e.node.name);

    it('lists published entries only, by name, with cursor pagination', async () => {
      const all = names(await gql({}, page, {}));
      expect([...all].sort()).toEqual(['DeepSeek-V3', 'Llama-3.3-70B-Instruct', 'Mistral-Small-24B', 'Phi-4', 'Qwen2.5-Coder-32B', 'gemma-3-27b-it']);
      const first = await gql({}, page, { first: 2 });
      expect(first.errors).toBeUndefined();
      expect(first.data!.endpoints.totalCount).toBe(6);
      expect(names(first)).toEqual(all.slice(0, 2));
      expect(first.data!.endpoints.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });

      const seen = [...names(first)];
      let after = first.data!.endpoints.pageInfo.endCursor as string;
      for (;;) {
        const next = await gql({}, page, { first: 2, after });
        seen.push(...names(next));
        expect(next.data!.endpoints.pageInfo.hasPreviousPage).toBe(true);
        after = next.data!.endpoints.pageInfo.endCursor;
        if (!next.data!.endpoints.pageInfo.hasNextPage) break;
      }
      expect(seen).toEqual(all);
      const empty = await gql({}, page, { first: 2, after });
      expect(empty.data!.endpoints).toMatchObject({ edges: [], totalCount: 6, pageInfo: { hasNextPage: false } });
      expect(seen).not.toContain('Hidden-Model');
    });

    it('filters by provider, tag, use case and search; totalCount counts the filtered set', async () => {
      const byProvider = await gql({}, page, { filter: { provider: 'meta' } });
      expect(names(byProvider)).toEqual(['Llama-3.3-70B-Instruct']);

      const byTag = await gql({}, page, { filter: { tag: 'cline' }, first: 1 });
      expect(byTag.data!.endpoints.totalCount).toBe(2);
      expect(names(byTag)).toEqual(['Llama-3.3-70B-Instruct']);
      expect(byTag.data!.endpoints.pageInfo.hasNextPage).toBe(true);
      const byTag2 = await gql({}, page, { filter: { tag: 'cline' }, first: 1, after: byTag.data!.endpoints.pageInfo.endCursor });
      expect(names(byTag2)).toEqual(['Qwen2.5-Coder-32B']);
      expect(byTag2.data!.endpoints.pageInfo.hasNextPage).toBe(false);

      const byUseCase = await gql({}, page, { filter: { useCase: 'Coding' } });
      expect(names(byUseCase)).toEqual(['DeepSeek-V3', 'Qwen2.5-Coder-32B']);

      const bySearch = await gql({}, page, { filter: { search: 'coder' } });
      expect(names(bySearch)).toEqual(['Qwen2.5-Coder-32B']);

      const dedicatedOnly = await gql({}, page, { filter: { surface: 'SHARED', tag: 'chat' } });
      expect(names(dedicatedOnly)).toEqual(['DeepSeek-V3', 'Llama-3.3-70B-Instruct', 'Mistral-Small-24B']);
    });

    it('refuses a bad cursor or page size with a field-named error', async () => {
      const bad = await gql({}, page, { after: 'nope' });
      expect(bad.errors?.[0]).toMatchObject({ message: 'after is not a valid cursor', extensions: { code: 'invalid', param: 'after' } });
      const big = await gql({}, `{ endpoints(first: 501) { totalCount } }`);
      expect(big.errors?.[0]?.extensions).toMatchObject({ param: 'first' });
    });

    it('gives facets with counts of published entries', async () => {
      const r = await gql({}, `{ catalogFacets { providers { value count } tags { value count } useCases { value count } } }`);
      expect(r.errors).toBeUndefined();
      const f = r.data!.catalogFacets;
      expect(f.providers).toContainEqual({ value: 'Meta', count: 1 }); // Hidden-Model (Meta) is unpublished
      expect(f.tags).toContainEqual({ value: 'chat', count: 4 });
      expect(f.tags).toContainEqual({ value: 'cline', count: 2 });
      expect(f.useCases).toContainEqual({ value: 'Coding', count: 2 });
      expect(f.useCases).toContainEqual({ value: 'Chat', count: 4 });
    });

    it('reads one entry by Name in spec string forms and structured, with the default summary', async () => {
      const q = `query($n: String!) { endpoint(name: $n) {
        name provider parameterSize parameterSizeBillions gpuCount contextLength concurrency concurrencyMultiplier
        coldStartTtft coldStartSeconds tokenPrice price { inputPerMillionTokens outputPerMillionTokens currency }
        recommendedUseCases useCases summary detailedIntro tags surfaces offeredShared offeredDedicated
      } }`;
      const llama = await gql({}, q, { n: 'Llama-3.3-70B-Instruct' });
      expect(llama.data!.endpoint).toEqual({
        name: 'Llama-3.3-70B-Instruct',
        provider: 'Meta',
        parameterSize: '70B',
        parameterSizeBillions: 70,
        gpuCount: 4,
        contextLength: 131072,
        concurrency: '8x',
        concurrencyMultiplier: 8,
        coldStartTtft: '45 sec',
        coldStartSeconds: 45,
        tokenPrice: '$0.59 / $0.79 per 1M tokens (input / output)',
        price: { inputPerMillionTokens: 0.59, outputPerMillionTokens: 0.79, currency: 'USD' },
        recommendedUseCases: 'Chat, Reasoning',
        useCases: ['Chat', 'Reasoning'],
        summary: 'Strong chat.',
        detailedIntro: 'Long intro.',
        tags: ['chat', 'cline'],
        surfaces: ['SHARED', 'DEDICATED'],
        offeredShared: true,
        offeredDedicated: true,
      });
      const phi = await gql({}, q, { n: 'Phi-4' });
      expect(phi.data!.endpoint).toMatchObject({
        summary: 'No summary has been added for this endpoint yet.',
        parameterSize: '',
        gpuCount: null,
        concurrency: '',
        coldStartTtft: '',
        tokenPrice: '',
        recommendedUseCases: '',
        detailedIntro: '',
      });
      expect((await gql({}, q, { n: 'Hidden-Model' })).data!.endpoint).toBeNull();
      expect((await gql({}, q, { n: 'nope' })).data!.endpoint).toBeNull();
    });
  });

  describe('integration shape', () => {
    const q = `query($n: String!) { endpoint(name: $n) {
      integration { mode apiBaseUrl modelName apiKey tenantSlug snippets { curl python node } }
      integrations { mode apiBaseUrl tenantSlug }
    } }`;

    it('anonymous callers get the shared base, the Name and the placeholder key, with snippets', async () => {
      const r = await gql({}, q, { n: 'Llama-3.3-70B-Instruct' });
      const i = r.data!.endpoint.integration;
      expect(i).toMatchObject({ mode: 'SHARED', apiBaseUrl: SHARED, modelName: 'Llama-3.3-70B-Instruct', apiKey: '<INFERENCE_API_KEY>', tenantSlug: null });
      expect(i.snippets.curl).toContain(`'${SHARED}/chat/completions'`);
      expect(i.snippets.curl).toContain('Authorization: Bearer <INFERENCE_API_KEY>');
      expect(i.snippets.curl).toContain('"model": "Llama-3.3-70B-Instruct"');
      expect(i.snippets.python).toContain('from openai import OpenAI');
      expect(i.snippets.python).toContain(`base_url="${SHARED}"`);
      expect(i.snippets.node).toContain("import OpenAI from 'openai';");
      expect(i.snippets.node).toContain(`baseURL: "${SHARED}"`);
      // No tenant URL leaks to anonymous callers.
      expect(r.data!.endpoint.integrations.map((x: { apiBaseUrl: string }) => x.apiBaseUrl)).toEqual([
        SHARED,
        `${DATAPLANE}/funccall/<tenant>/endpoints/Llama-3.3-70B-Instruct/v1`,
      ]);
      expect(r.text).not.toContain('acme');
    });

    it('a member of a tenant that deployed the entry gets the tenant-scoped dedicated URL', async () => {
      const r = await gql(callers.memberA, q, { n: 'Llama-3.3-70B-Instruct' });
      expect(r.data!.endpoint.integration).toMatchObject({
        mode: 'DEDICATED',
        tenantSlug: 'acme',
        apiKey: '<INFERENCE_API_KEY>',
        apiBaseUrl: `${DATAPLANE}/funccall/acme/endpoints/Llama-3.3-70B-Instruct/v1`,
        modelName: 'Meta/Llama-3.3-70B-Instruct',
      });
      expect(r.data!.endpoint.integration.snippets.curl).toContain(`${DATAPLANE}/funccall/acme/endpoints/Llama-3.3-70B-Instruct/v1/chat/completions`);
      expect(r.data!.endpoint.integrations).toEqual([
        { mode: 'SHARED', apiBaseUrl: SHARED, tenantSlug: null },
        { mode: 'DEDICATED', apiBaseUrl: `${DATAPLANE}/funccall/acme/endpoints/Llama-3.3-70B-Instruct/v1`, tenantSlug: 'acme' },
      ]);
      const shared = await gql(callers.memberA, `{ endpoint(name: "Llama-3.3-70B-Instruct") { integration(mode: SHARED) { apiBaseUrl modelName } } }`);
      expect(shared.data!.endpoint.integration).toEqual({ apiBaseUrl: SHARED, modelName: 'Llama-3.3-70B-Instruct' });
      // An entry the tenant has not deployed: the shared base.
      const other = await gql(callers.memberA, q, { n: 'Qwen2.5-Coder-32B' });
      expect(other.data!.endpoint.integration).toMatchObject({ mode: 'SHARED', apiBaseUrl: SHARED });
    });

    it("a member of another tenant never gets A's URL", async () => {
      const r = await gql(callers.memberB, q, { n: 'Llama-3.3-70B-Instruct' });
      expect(r.data!.endpoint.integration).toMatchObject({ mode: 'SHARED', apiBaseUrl: SHARED });
      expect(r.text).not.toContain('/funccall/acme/');
      const asked = await gql(
        callers.memberB,
        `{ endpoint(name: "Llama-3.3-70B-Instruct") { integration(mode: DEDICATED, tenantSlug: "acme") { apiBaseUrl } } }`,
      );
      expect(asked.errors?.[0]).toMatchObject({ message: 'tenant not found', extensions: { code: 'not_found' } });
      expect(asked.text).not.toContain('/funccall/acme/');
    });

    it('shared-only and dedicated-only entries say so', async () => {
      const dedicatedOnly = await gql({}, q, { n: 'gemma-3-27b-it' });
      expect(dedicatedOnly.data!.endpoint.integration).toMatchObject({
        mode: 'DEDICATED',
        apiBaseUrl: `${DATAPLANE}/funccall/<tenant>/endpoints/gemma-3-27b-it/v1`,
      });
      const sharedOnly = await gql(callers.memberA, `{ endpoint(name: "DeepSeek-V3") { integration(mode: DEDICATED) { apiBaseUrl } } }`);
      expect(sharedOnly.errors?.[0]?.message).toBe('DeepSeek-V3 is offered on the shared surface only');
    });
  });

  describe('limits and errors', () => {
    it('refuses a query deeper than the limit with a clear error', async () => {
      let sel = 'name';
      for (let i = 0; i < 20; i++) sel = `ofType { ${sel} }`;
      const r = await gql({}, `{ __type(name: "Endpoint") { fields { type { ${sel} } } } }`);
      expect(r.data ?? null).toBeNull();
      expect(r.errors?.[0]?.message).toMatch(/^Query is too deep: fields are nested more than 15 levels/);
    });

    it('refuses a document nested past the parser, or of too many tokens, with a 400 and no internal error', async () => {
      const nested = await gql({}, `{ ${'viewer {'.repeat(3000)} kind ${'}'.repeat(3000)} }`);
      expect(nested.status).toBe(400);
      expect(outcome(nested)).not.toBe('internal_error');
      // Whether the parser's stack runs out before the depth rule sees the document depends on the machine's stack;
      // either way it is a clear 400.
      expect(nested.errors?.[0]?.message).toMatch(/nested too deeply|^Query is too deep|more th[ae]t 20000 tokens/);
      const fragments = Array.from({ length: 5000 }, (_, i) => `fragment F${i} on Query { __typename }`).join(' ');
      const many = await gql({}, `{ __typename } ${fragments}`);
      expect(many.status).toBe(400);
      expect(many.errors?.[0]?.message).toMatch(/more th[ae]t 20000 tokens/);
      // The parse cache is off: the same refused document is refused again, not answered from a cache.
      expect((await gql({}, `{ __typename } ${fragments}`)).status).toBe(400);
    });

    it('has no GraphiQL page: a browser asking for HTML gets no HTML', async () => {
      const res = await fetch(`${baseUrl}/graphql`, { headers: { accept: 'text/html' } });
      expect(res.headers.get('content-type') ?? '').not.toContain('text/html');
      expect(await res.text()).not.toContain('GraphiQL');
    });

    it('allows the standard introspection query', async () => {
      const { getIntrospectionQuery } = (await import('node:module')).createRequire(import.meta.url)('graphql') as typeof import('graphql');
      const r = await gql({}, getIntrospectionQuery());
      expect(r.errors).toBeUndefined();
      expect(r.data!.__schema.queryType.name).toBe('Query');
    });

    it('refuses a query over the cost budget before resolving anything', async () => {
      const r = await gql(
        {},
        `{ endpoints(first: 500) { edges { node { name provider summary tags useCases
        integrations { apiBaseUrl snippets { curl python node } } } } } }`,
      );
      expect(r.data ?? null).toBeNull();
      expect(r.errors?.[0]?.message).toMatch(/^Query is too costly: cost \d+ exceeds the budget of 5000/);
      const ok = await gql({}, `{ endpoints(first: 20) { edges { node { name integration { apiBaseUrl } } } } }`);
      expect(ok.errors).toBeUndefined();
    });

    it('masks unexpected errors and rejects a bad admin token', async () => {
      const r = await gql({ bearer: 'infa_not-a-real-token' }, `{ viewer { kind } }`);
      expect(r.status).toBe(401);
      expect(r.errors?.[0]).toMatchObject({ message: 'admin token is invalid, revoked or expired', extensions: { code: 'unauthenticated' } });
      const ik = await gql({ bearer: keyA.secret }, `{ viewer { kind } }`);
      expect(ik.errors?.[0]?.extensions?.code).toBe('unauthenticated');
    });

    it('refuses cookie-authenticated mutations from another origin', async () => {
      const r = await gql(
        callers.ownerA,
        `mutation($t: ID!) { createApiKey(tenantId: $t, name: "x") { secret } }`,
        { t: tenantA.id },
        { origin: 'https://evil.example' },
      );
      expect(r.errors?.[0]?.extensions?.code).toBe('forbidden');
      expect(r.status, 'the request as a whole is refused: 403, as tRPC answers').toBe(403);
      const keys = await gql(callers.ownerA, `query($t: ID) { tenant(id: $t) { apiKeys { name } } }`, { t: tenantA.id });
      expect(keys.data!.tenant.apiKeys.map((k: { name: string }) => k.name)).toEqual(['ci']);
    });
  });

  describe('viewer and tenant data', () => {
    it('describes the caller and their tenants', async () => {
      expect((await gql({}, `{ viewer { kind } }`)).data!.viewer).toBeNull();
      const m = await gql(callers.memberA, `{ viewer { kind isPlatformAdmin user { email } tenants { slug viewerRole } } }`);
      expect(m.data!.viewer).toEqual({
        kind: 'USER',
        isPlatformAdmin: false,
        user: { email: 'member-a@example.com' },
        tenants: [{ slug: 'acme', viewerRole: 'MEMBER' }],
      });
      const b = await gql(callers.memberB, `{ viewer { tenants { slug viewerRole } } }`);
      expect(b.data!.viewer.tenants).toEqual([{ slug: 'bravo', viewerRole: 'OWNER' }]);
      const t = await gql(callers.tokenA, `{ viewer { kind isPlatformAdmin token { tenantId } tenants { slug viewerRole } } }`);
      expect(t.data!.viewer).toEqual({
        kind: 'ADMIN_TOKEN',
        isPlatformAdmin: false,
        token: { tenantId: tenantA.id },
        tenants: [{ slug: 'acme', viewerRole: 'OWNER' }],
      });
      const p = await gql(callers.platformToken, `{ viewer { isPlatformAdmin } }`);
      expect(p.data!.viewer.isPlatformAdmin).toBe(true);
    });

    it('lists keys without secrets, deployments with URLs, and usage by day and endpoint', async () => {
      const now = Date.now();
      await database.db
        .insertInto('usageRecords')
        .values([
          {
            requestId: 'r1',
            tenantId: tenantA.id,
            keyId: keyA.id,
            entryId: null,
            deploymentId: null,
            mode: 'shared',
            model: 'Llama-3.3-70B-Instruct',
            promptTokens: 1000,
            completionTokens: 500,
            estimated: false,
            status: 200,
            ttftMs: 10,
            latencyMs: 20,
            costUsd: 0.001,
            startedAt: new Date(now - 3600_000),
          },
          {
            requestId: 'r2',
            tenantId: tenantB.id,
            keyId: null,
            entryId: null,
            deploymentId: null,
            mode: 'shared',
            model: 'Phi-4',
            promptTokens: 7,
            completionTokens: 7,
            estimated: false,
            status: 200,
            ttftMs: 10,
            latencyMs: 20,
            costUsd: 0,
            startedAt: new Date(now - 3600_000),
          },
        ] as never)
        .execute();
      const r = await gql(
        callers.memberA,
        `query($t: ID) { tenant(id: $t) {
        apiKeys { id name prefix createdAt lastUsedAt expiresAt revokedAt }
        deployments { id endpointName state minReplicas maxReplicas readyReplicas apiBaseUrl modelName replicas { state } }
        usage { totals { requests promptTokens completionTokens costUsd } byDay { day requests } byEndpoint { name mode requests } }
      } }`,
        { t: tenantA.id },
      );
      expect(r.errors).toBeUndefined();
      const tenant = r.data!.tenant;
      expect(tenant.apiKeys).toHaveLength(1);
      expect(tenant.apiKeys[0]).toMatchObject({ id: keyA.id, name: 'ci', revokedAt: null });
      expect(keyA.secret.startsWith(tenant.apiKeys[0].prefix)).toBe(true);
      expect(r.text).not.toContain(keyA.secret);
      expect(tenant.deployments).toEqual([
        expect.objectContaining({
          id: deploymentA,
          endpointName: 'Llama-3.3-70B-Instruct',
          minReplicas: 0,
          maxReplicas: 1, // issue 10: min 0 by default
          apiBaseUrl: `${DATAPLANE}/funccall/acme/endpoints/Llama-3.3-70B-Instruct/v1`,
          modelName: 'Meta/Llama-3.3-70B-Instruct',
        }),
      ]);
      expect(tenant.usage.totals).toEqual({ requests: 1, promptTokens: 1000, completionTokens: 500, costUsd: 0.001 });
      expect(tenant.usage.byDay).toHaveLength(1);
      expect(tenant.usage.byEndpoint).toEqual([{ name: 'Llama-3.3-70B-Instruct', mode: 'SHARED', requests: 1 }]);
      const bad = await gql(callers.memberA, `query($t: ID) { tenant(id: $t) { usage(from: "2026-02-01", to: "2026-01-01") { totals { requests } } } }`, {
        t: tenantA.id,
      });
      expect(bad.errors?.[0]).toMatchObject({ message: 'from must be before to', extensions: { param: 'from' } });
    });
  });

  describe('catalog administration', () => {
    it('creates, validates, updates, publishes and unpublishes entries (platform admins)', async () => {
      const create = `mutation($i: CreateCatalogEntryInput!) { createCatalogEntry(input: $i) { id name parameterSize concurrency coldStartTtft tokenPrice recommendedUseCases published } }`;
      const bad = await gql(callers.platformToken, create, { i: { name: 'New-Model', parameterSize: '70 billion' } });
      expect(bad.errors?.[0]).toMatchObject({ extensions: { code: 'invalid', param: 'parameterSize' } });
      expect(bad.errors?.[0]?.message).toMatch(/^parameterSize: expected the form "<number>B"/);
      const bad2 = await gql(callers.platformToken, create, { i: { name: 'New-Model', coldStartTtft: '5s' } });
      expect(bad2.errors?.[0]?.extensions?.param).toBe('coldStartTtft');
      const bad3 = await gql(callers.platformToken, create, { i: { name: 'New-Model', parameterSize: '7B', parameterSizeBillions: 8 } });
      expect(bad3.errors?.[0]?.extensions?.param).toBe('parameterSizeBillions');

      const ok = await gql(callers.platformToken, create, {
        i: {
          name: 'New-Model',
          provider: 'acme-labs',
          parameterSize: '7B',
          concurrency: '2x',
          coldStartTtft: '5 sec',
          tokenPrice: '$0.10 / $0.30 per 1M tokens',
          recommendedUseCases: 'Chat, Agents',
          tags: ['chat'],
        },
      });
      expect(ok.errors).toBeUndefined();
      expect(ok.data!.createCatalogEntry).toMatchObject({
        name: 'New-Model',
        parameterSize: '7B',
        concurrency: '2x',
        coldStartTtft: '5 sec',
        tokenPrice: '$0.10 / $0.30 per 1M tokens (input / output)',
        recommendedUseCases: 'Chat, Agents',
        published: false,
      });
      const id = ok.data!.createCatalogEntry.id;
      expect((await gql({}, `{ endpoint(name: "New-Model") { name } }`)).data!.endpoint).toBeNull();

      const upd = await gql(
        callers.admin,
        `mutation($id: ID!) { updateCatalogEntry(id: $id, input: { gpuCount: 2, summary: "Small.", parameterSize: null }) { gpuCount summary parameterSize } }`,
        { id },
      );
      expect(upd.data!.updateCatalogEntry).toEqual({ gpuCount: 2, summary: 'Small.', parameterSize: '' });
      const neg = await gql(callers.admin, `mutation($id: ID!) { updateCatalogEntry(id: $id, input: { gpuCount: -1 }) { gpuCount } }`, { id });
      expect(neg.errors?.[0]?.extensions?.param).toBe('gpuCount');

      await gql(callers.admin, `mutation($id: ID!) { publishCatalogEntry(id: $id) { published } }`, { id });
      expect((await gql({}, `{ endpoint(name: "New-Model") { name } }`)).data!.endpoint).toEqual({ name: 'New-Model' });
      await gql(callers.platformToken, `mutation($id: ID!) { unpublishCatalogEntry(id: $id) { published } }`, { id });
      expect((await gql({}, `{ endpoint(name: "New-Model") { name } }`)).data!.endpoint).toBeNull();
    });
  });

  describe('authorisation matrix', () => {
    const OK_A: Record<Actor, string> = {
      anonymous: 'unauthenticated',
      memberA: 'ok',
      ownerA: 'ok',
      memberB: 'not_found',
      admin: 'ok',
      platformToken: 'ok',
      tokenA: 'ok',
      tokenB: 'not_found',
    };
    const PLATFORM: Record<Actor, string> = {
      anonymous: 'unauthenticated',
      memberA: 'forbidden',
      ownerA: 'forbidden',
      memberB: 'forbidden',
      admin: 'ok',
      platformToken: 'ok',
      tokenA: 'forbidden',
      tokenB: 'forbidden',
    };

    const reads: [string, string, Record<Actor, string>][] = [
      ['tenant by id', `query($t: ID) { tenant(id: $t) { id slug name } }`, OK_A],
      ['tenant by slug', `{ tenant(slug: "acme") { id } }`, OK_A],
      ['tenant.viewerRole', `query($t: ID) { tenant(id: $t) { viewerRole } }`, OK_A],
      ['tenant.apiKeys', `query($t: ID) { tenant(id: $t) { apiKeys { id prefix } } }`, OK_A],
      ['tenant.deployments', `query($t: ID) { tenant(id: $t) { deployments { id apiBaseUrl } } }`, OK_A],
      ['tenant.deployment', `query($t: ID, $d: ID!) { tenant(id: $t) { deployment(id: $d) { id } } }`, OK_A],
      ['tenant.usage', `query($t: ID) { tenant(id: $t) { usage { totals { requests } } } }`, OK_A],
      ['dedicated integration of A', `{ endpoint(name: "Llama-3.3-70B-Instruct") { integration(mode: DEDICATED, tenantSlug: "acme") { apiBaseUrl } } }`, OK_A],
      ['tenants (all)', `{ tenants { id } }`, PLATFORM],
      ['catalogEntry (unpublished)', `{ catalogEntry(name: "Hidden-Model") { id } }`, PLATFORM],
    ];

    for (const [name, query, expected] of reads) {
      it(`query ${name}`, async () => {
        const got: Record<string, string> = {};
        for (const actor of ACTORS) {
          const r = await gql(callers[actor], query, { t: tenantA.id, d: deploymentA });
          got[actor] = outcome(r);
          if (got[actor] !== 'ok') {
            expect(r.text).not.toContain(deploymentA);
            expect(r.text).not.toContain('/funccall/acme/');
          }
        }
        expect(got).toEqual(expected);
      });
    }

    it('tenant with neither id nor slug is an invalid request naming id, not a tenant that does not exist', async () => {
      for (const query of ['{ tenant { id } }', 'query($t: ID) { tenant(id: $t) { id } }']) {
        const r = await gql(callers.ownerA, query, { t: null });
        expect(r.errors?.[0], query).toMatchObject({ message: 'name the tenant by id or slug', extensions: { code: 'invalid', param: 'id' } });
      }
      // A slug no tenant has is still not found; anonymous callers still get unauthenticated first.
      expect(outcome(await gql(callers.ownerA, '{ tenant(slug: "") { id } }'))).toBe('not_found');
      expect(outcome(await gql(callers.anonymous, '{ tenant { id } }'))).toBe('unauthenticated');
    });

    it('a malformed Bearer header is a 401 that says what is wrong with it', async () => {
      const empty = await gql(callers.anonymous, '{ viewer { tenants { id } } }', {}, { authorization: 'Bearer   ' });
      expect(empty.errors?.[0]).toMatchObject({ message: 'the Bearer credential is empty', extensions: { code: 'unauthenticated' } });
      const two = await gql(callers.anonymous, '{ viewer { tenants { id } } }', {}, { authorization: 'Bearer two words' });
      expect(two.errors?.[0]).toMatchObject({ message: 'the Bearer credential must be one token, without spaces', extensions: { code: 'unauthenticated' } });
    });

    it('tenant with both id and slug must name one tenant', async () => {
      const mine = await gql(callers.ownerA, '{ viewer { tenants { id slug } } }');
      const [t] = mine.data!.viewer.tenants as { id: string; slug: string }[];
      const both = await gql(callers.ownerA, 'query($t: ID, $s: String) { tenant(id: $t, slug: $s) { id } }', { t: t!.id, s: 'some-other-slug' });
      expect(both.errors?.[0]).toMatchObject({ extensions: { code: 'invalid', param: 'slug' } });
    });

    it('DateTime arguments must be real dates: no rolled-over days, no year 0000', async () => {
      const usage = 'query($t: ID!, $f: DateTime!, $to: DateTime!) { tenant(id: $t) { usage(from: $f, to: $to) { totals { requests } } } }';
      const mine = await gql(callers.ownerA, '{ viewer { tenants { id } } }');
      const t = (mine.data!.viewer.tenants as { id: string }[])[0]!.id;
      for (const [f, to] of [
        ['2030-02-30T00:00:00Z', '2030-03-31T00:00:00Z'],
        ['2031-02-29', '2031-03-01'],
        ['0000-01-01T00:00:00Z', '0000-06-01T00:00:00Z'],
        ['2030-01-01T24:00:00Z', '2030-01-02T00:00:00Z'],
        // Years 0001 to 9999 in UTC as well: these offsets move them to year 0000 and 10000.
        ['0001-01-01T00:00:00+14:00', '0001-06-01T00:00:00Z'],
        ['9999-12-31T23:00:00Z', '9999-12-31T23:59:59-14:00'],
      ]) {
        const r = await gql(callers.ownerA, usage, { t, f, to });
        expect(r.errors?.[0]?.message, f).toMatch(/real date/);
        expect(r.text).not.toMatch(/out of range|NUL/);
      }
      const ok = await gql(callers.ownerA, usage, { t, f: '2028-02-29', to: '2028-03-01T00:00:00Z' });
      expect(ok.errors).toBeUndefined();
    });

    it("tenant B's callers read nothing of A through B's tenant with A's ids", async () => {
      for (const actor of ['memberB', 'tokenB'] as const) {
        const r = await gql(callers[actor], `query($t: ID, $d: ID!) { tenant(id: $t) { deployment(id: $d) { id } deployments { id } apiKeys { id } } }`, {
          t: tenantB.id,
          d: deploymentA,
        });
        expect(outcome(r)).toBe('not_found');
        expect(r.text).not.toContain(deploymentA);
        const list = await gql(callers[actor], `query($t: ID) { tenant(id: $t) { deployments { id } apiKeys { id } usage { totals { requests } } } }`, {
          t: tenantB.id,
        });
        expect(list.data!.tenant).toEqual({ deployments: [], apiKeys: expect.any(Array), usage: { totals: { requests: 1 } } });
        expect(list.text).not.toContain(keyA.id);
      }
    });

    const state = async () => {
      const db = database.db;
      const dep = await db.selectFrom('deployments').select(['id', 'state', 'minReplicas', 'maxReplicas']).where('id', '=', deploymentA).executeTakeFirst();
      const key = await db.selectFrom('apiKeys').select(['revokedAt']).where('id', '=', keyA.id).executeTakeFirstOrThrow();
      const keys = await db.selectFrom('apiKeys').select('id').where('tenantId', '=', tenantA.id).execute();
      const deps = await db.selectFrom('deployments').select('id').where('tenantId', '=', tenantA.id).execute();
      return { dep, revoked: key.revokedAt !== null, keys: keys.length, deps: deps.length };
    };

    it("mutations on A: refused for anonymous and tenant B's callers (A's ids through B included), nothing changes", async () => {
      const before = await state();
      for (const actor of ['anonymous', 'memberB', 'tokenB'] as const) {
        const expected = actor === 'anonymous' ? 'unauthenticated' : 'not_found';
        for (const t of [tenantA.id, tenantB.id]) {
          if (t === tenantB.id && actor === 'anonymous') continue;
          const want = t === tenantB.id ? 'not_found' : expected;
          const vars = { t, d: deploymentA, k: keyA.id };
          const ops = [
            `mutation($t: ID!) { createApiKey(tenantId: $t, name: "x") { secret } }`,
            `mutation($t: ID!, $k: ID!) { revokeApiKey(tenantId: $t, id: $k) { id } }`,
            `mutation($t: ID!) { deployEndpoint(tenantId: $t, endpointName: "Qwen2.5-Coder-32B") { id } }`,
            `mutation($t: ID!, $d: ID!) { scaleDeployment(tenantId: $t, id: $d, minReplicas: 0, maxReplicas: 3) { id } }`,
            `mutation($t: ID!, $d: ID!) { stopDeployment(tenantId: $t, id: $d) { id } }`,
            `mutation($t: ID!, $d: ID!) { startDeployment(tenantId: $t, id: $d) { id } }`,
            `mutation($t: ID!, $d: ID!) { deleteDeployment(tenantId: $t, id: $d) }`,
          ];
          for (const op of ops) {
            // createApiKey / deployEndpoint on B's own tenant are allowed for B: skip those (they touch only B).
            if (t === tenantB.id && (op.includes('createApiKey') || op.includes('deployEndpoint'))) continue;
            const r = await gql(callers[actor], op, vars);
            expect({ actor, t: t === tenantA.id ? 'A' : 'B', op: op.slice(0, 60), got: outcome(r) }).toEqual({
              actor,
              t: t === tenantA.id ? 'A' : 'B',
              op: op.slice(0, 60),
              got: want,
            });
            expect(r.text).not.toContain('infk_');
          }
        }
      }
      expect(await state()).toEqual(before);
    });

    it('mutations on A: allowed for members, owners, platform admins and A-scoped tokens; member revokes only own keys', async () => {
      for (const actor of ['memberA', 'ownerA', 'admin', 'platformToken', 'tokenA'] as const) {
        const c = callers[actor];
        const created = await gql(c, `mutation($t: ID!) { createApiKey(tenantId: $t, name: "k") { key { id prefix } secret } }`, { t: tenantA.id });
        expect(outcome(created)).toBe('ok');
        expect(created.data!.createApiKey.secret).toMatch(/^infk_/);
        const own = await gql(c, `mutation($t: ID!, $k: ID!) { revokeApiKey(tenantId: $t, id: $k) { revokedAt } }`, {
          t: tenantA.id,
          k: created.data!.createApiKey.key.id,
        });
        expect(outcome(own)).toBe('ok');
        expect(own.data!.revokeApiKey.revokedAt).not.toBeNull();

        const dep = await gql(
          c,
          `mutation($t: ID!) { deployEndpoint(tenantId: $t, endpointName: "Mistral-Small-24B", minReplicas: 0, maxReplicas: 2) { id state } }`,
          { t: tenantA.id },
        );
        expect(outcome(dep)).toBe('ok');
        const id = dep.data!.deployEndpoint.id;
        const scaled = await gql(
          c,
          `mutation($t: ID!, $d: ID!) { scaleDeployment(tenantId: $t, id: $d, minReplicas: 1, maxReplicas: 3) { minReplicas maxReplicas } }`,
          { t: tenantA.id, d: id },
        );
        expect(scaled.data!.scaleDeployment).toEqual({ minReplicas: 1, maxReplicas: 3 });
        const stopped = await gql(c, `mutation($t: ID!, $d: ID!) { stopDeployment(tenantId: $t, id: $d) { state } }`, { t: tenantA.id, d: id });
        expect(stopped.errors ?? []).toEqual([]);
        expect(stopped.data!.stopDeployment.state).toBe('STOPPED');
        const started = await gql(c, `mutation($t: ID!, $d: ID!) { startDeployment(tenantId: $t, id: $d) { state } }`, { t: tenantA.id, d: id });
        expect(outcome(started)).toBe('ok');
        const deleted = await gql(c, `mutation($t: ID!, $d: ID!) { deleteDeployment(tenantId: $t, id: $d) }`, { t: tenantA.id, d: id });
        expect(deleted.data!.deleteDeployment).toBe(true);
      }
      // A member may not revoke a key someone else created; the owner may.
      const notOwn = await gql(callers.memberA, `mutation($t: ID!, $k: ID!) { revokeApiKey(tenantId: $t, id: $k) { id } }`, { t: tenantA.id, k: keyA.id });
      expect(outcome(notOwn)).toBe('forbidden');
      expect((await state()).revoked).toBe(false);
    });

    it('platform mutations: only platform admins and platform tokens', async () => {
      const got: Record<string, string> = {};
      for (const actor of ACTORS) {
        const r = await gql(callers[actor], `mutation($s: String!) { createTenant(slug: $s, name: "N") { slug } }`, { s: `t-${actor.toLowerCase()}` });
        got[actor] = outcome(r);
      }
      expect(got).toEqual(PLATFORM);
      const entry = await database.db.selectFrom('catalogEntries').select('id').where('name', '=', 'Hidden-Model').executeTakeFirstOrThrow();
      for (const [op, vars] of [
        [`mutation { createCatalogEntry(input: { name: "X-ACTOR" }) { id } }`, {}],
        [`mutation($id: ID!) { updateCatalogEntry(id: $id, input: { summary: "changed" }) { id } }`, { id: entry.id }],
        [`mutation($id: ID!) { publishCatalogEntry(id: $id) { id } }`, { id: entry.id }],
        [`mutation($id: ID!) { unpublishCatalogEntry(id: $id) { id } }`, { id: entry.id }],
      ] as const) {
        const results: Record<string, string> = {};
        for (const actor of ACTORS) {
          results[actor] = outcome(await gql(callers[actor], op.replace('X-ACTOR', `X-${actor}`), vars));
        }
        expect({ op, results }).toEqual({ op, results: PLATFORM });
      }
    });
  });
});
