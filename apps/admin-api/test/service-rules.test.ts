// One home per rule: rules that used to live in one transport's adapter (catalog audit rows in the
// tRPC router, key limits only on tRPC) now live in the services, so both transports obey them.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp } from '../src/app.ts';
import { listAudit } from '../src/modules/audit/audit.service.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { addMember, createTenant } from '../src/modules/tenants/tenants.service.ts';
import { NODE_TOKEN } from './helpers.ts';

const CONSOLE = 'http://console.test';

interface Reply {
  status: number;
  // Parsed JSON bodies: the assertions check their values, property paths vary by procedure.

  data: any;
  code: string | null;
  param: string | null;
  message: string | null;
}

describe.each(testBackends())('rules shared by tRPC and GraphQL (%s)', (kind) => {
  let database: TestDatabase;
  let app: FastifyInstance;
  let baseUrl: string;
  let admin: { cookie: string; userId: string };
  let member: { cookie: string; userId: string };
  let tenantId: string;

  const headers = (cookie: string): Record<string, string> => ({ 'content-type': 'application/json', cookie: `session=${cookie}`, origin: CONSOLE });

  async function trpc(cookie: string, path: string, input: unknown): Promise<Reply> {
    const res = await fetch(`${baseUrl}/trpc/${path}`, { method: 'POST', headers: headers(cookie), body: JSON.stringify(input) });
    const body = (await res.json()) as { result?: { data: unknown }; error?: { message: string; data: { code: string; param: string | null } } };
    return {
      status: res.status,
      data: body.result?.data ?? null,
      code: body.error?.data.code ?? null,
      param: body.error?.data.param ?? null,
      message: body.error?.message ?? null,
    };
  }

  async function gql(cookie: string, query: string, variables: Record<string, unknown> = {}): Promise<Reply> {
    const res = await fetch(`${baseUrl}/graphql`, { method: 'POST', headers: headers(cookie), body: JSON.stringify({ query, variables }) });

    const body = (await res.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string; param?: string | null } }[] };
    const err = body.errors?.[0];
    return {
      status: res.status,
      data: body.data ?? null,
      code: err?.extensions?.code ?? null,
      param: err?.extensions?.param ?? null,
      message: err?.message ?? null,
    };
  }

  beforeAll(async () => {
    database = await createTestDb(kind);
    app = await buildAdminApp({
      db: database.db,
      dbKind: database.kind,
      pgPool: database.pool,
      nodeToken: NODE_TOKEN,
      consoleOrigins: [CONSOLE],
      publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const a = await createUser(database.db, { email: `admin-${kind}@example.com`, password: 'long enough password', isPlatformAdmin: true });
    const m = await createUser(database.db, { email: `member-${kind}@example.com`, password: 'long enough password' });
    admin = { cookie: (await createSession(database.db, a.id)).token, userId: a.id };
    member = { cookie: (await createSession(database.db, m.id)).token, userId: m.id };
    tenantId = (await createTenant(database.db, { slug: `rules-${kind}`, name: 'Rules' })).id;
    await addMember(database.db, { tenantId, userId: m.id, role: 'member' });
  });

  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  const catalogAudit = async (entryId: string) =>
    (await listAudit(database.db, { limit: 500 })).filter((r) => r.targetId === entryId).map((r) => ({ action: r.action, actor: r.actorUserId }));

  it('GraphQL catalog mutations write audit rows, as tRPC ones do', async () => {
    const created = await gql(
      admin.cookie,
      `mutation { createCatalogEntry(input: { name: "Audited-GQL", provider: "Meta", parameterSize: "8B" }) { id published } }`,
    );
    expect(created.code).toBeNull();
    const id = created.data.createCatalogEntry.id as string;
    expect(created.data.createCatalogEntry.published).toBe(false);
    await gql(admin.cookie, `mutation($id: ID!) { updateCatalogEntry(id: $id, input: { summary: "Now with a summary." }) { id } }`, { id });
    await gql(admin.cookie, `mutation($id: ID!) { publishCatalogEntry(id: $id) { id } }`, { id });
    await gql(admin.cookie, `mutation($id: ID!) { unpublishCatalogEntry(id: $id) { id } }`, { id });
    expect(await catalogAudit(id)).toEqual(
      ['catalog.unpublish', 'catalog.publish', 'catalog.update', 'catalog.create'].map((action) => ({ action, actor: admin.userId })),
    );

    const viaTrpc = await trpc(admin.cookie, 'catalog.create', { name: 'Audited-tRPC' });
    expect((await catalogAudit(viaTrpc.data.id)).map((r) => r.action)).toEqual(['catalog.create']);
  });

  it('writes no audit row and no entry when a catalog mutation is refused', async () => {
    const denied = await gql(member.cookie, `mutation { createCatalogEntry(input: { name: "Not-Allowed" }) { id } }`);
    expect(denied.code).toBe('forbidden');
    const bad = await gql(admin.cookie, `mutation { createCatalogEntry(input: { name: "Bad-Size", parameterSize: "huge" }) { id } }`);
    expect(bad).toMatchObject({ code: 'invalid', param: 'parameterSize' });
    const names = (await database.db.selectFrom('catalogEntries').select('name').execute()).map((r) => r.name);
    expect(names).not.toContain('Not-Allowed');
    expect(names).not.toContain('Bad-Size');
    const audit = await listAudit(database.db, { action: 'catalog.create', limit: 500 });
    expect(audit.map((r) => (r.detail as { name?: string } | null)?.name)).not.toContain('Bad-Size');
  });

  const CREATE_KEY = `mutation($t: ID!, $rpm: Int, $tpm: Int) {
    createApiKey(tenantId: $t, name: "limited", rpmLimit: $rpm, tpmLimit: $tpm) { secret key { id rpmLimit tpmLimit } }
  }`;

  it('GraphQL createApiKey accepts per-key limits, stored as tRPC stores them', async () => {
    const r = await gql(member.cookie, CREATE_KEY, { t: tenantId, rpm: 120, tpm: 50_000 });
    expect(r.code).toBeNull();
    expect(r.data.createApiKey.key).toMatchObject({ rpmLimit: 120, tpmLimit: 50_000 });
    const listed = await gql(member.cookie, `query($t: ID!) { tenant(id: $t) { apiKeys { id rpmLimit tpmLimit } } }`, { t: tenantId });
    expect(listed.data.tenant.apiKeys).toContainEqual({ id: r.data.createApiKey.key.id, rpmLimit: 120, tpmLimit: 50_000 });
    const row = await database.db
      .selectFrom('apiKeys')
      .select(['rpmLimit', 'tpmLimit', 'createdBy'])
      .where('id', '=', r.data.createApiKey.key.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ rpmLimit: 120, tpmLimit: 50_000, createdBy: member.userId });

    const t = await trpc(member.cookie, 'keys.create', { tenantId, name: 'limited', rpmLimit: 120, tpmLimit: 50_000 });
    expect(t.data.key).toMatchObject({ rpmLimit: 120, tpmLimit: 50_000 });
  });

  it.each([
    ['rpmLimit', 0, undefined],
    ['tpmLimit', undefined, -5],
    ['rpmLimit', 1_500_000_000, undefined],
  ] as const)('refuses a bad %s with the same error on both transports', async (field, rpm, tpm) => {
    const before = await database.db
      .selectFrom('apiKeys')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    const g = await gql(member.cookie, CREATE_KEY, { t: tenantId, rpm, tpm });
    const t = await trpc(member.cookie, 'keys.create', { tenantId, name: 'limited', rpmLimit: rpm, tpmLimit: tpm });
    expect(g).toMatchObject({ code: 'invalid', param: field });
    expect(t).toMatchObject({ status: 400, code: 'BAD_REQUEST', param: field });
    expect(g.message).toBe(t.message);
    expect(t.message).toMatch(new RegExp(`^${field} must be a whole number from 1 to`));
    const after = await database.db
      .selectFrom('apiKeys')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
  });

  it('bounds tenant names in the service: 100 characters, the same error on both transports, nothing stored', async () => {
    const tenants = async () => (await database.db.selectFrom('tenants').select('slug').execute()).length;
    const before = await tenants();
    const CREATE_TENANT = `mutation($s: String!, $n: String!) { createTenant(slug: $s, name: $n) { slug name } }`;
    for (const name of ['x'.repeat(101), 'x'.repeat(20_000)]) {
      const g = await gql(admin.cookie, CREATE_TENANT, { s: `long-g-${kind}`, n: name });
      const t = await trpc(admin.cookie, 'tenants.create', { slug: `long-t-${kind}`, name });
      expect(g).toMatchObject({ code: 'invalid', param: 'name', message: 'name must be at most 100 characters' });
      expect(t).toMatchObject({ status: 400, param: 'name', message: g.message });
    }
    expect(await tenants()).toBe(before);
    const ok = await gql(admin.cookie, CREATE_TENANT, { s: `long-ok-${kind}`, n: ` ${'x'.repeat(100)} ` });
    expect(ok.data.createTenant).toEqual({ slug: `long-ok-${kind}`, name: 'x'.repeat(100) });
  });

  it("deployEndpoint's errors name the caller's own argument: endpointName on GraphQL, entryName on tRPC", async () => {
    await createEntry(database.db, { name: `Rules-Shared-${kind}`, provider: 'acme', offeredShared: true, offeredDedicated: false, published: true });
    await createEntry(database.db, { name: `Rules-Dedicated-${kind}`, provider: 'acme', offeredShared: false, offeredDedicated: true, published: true });
    const DEPLOY = `mutation($t: ID!, $n: String!) { deployEndpoint(tenantId: $t, endpointName: $n) { id } }`;
    const deploy = (n: string) =>
      Promise.all([gql(member.cookie, DEPLOY, { t: tenantId, n }), trpc(member.cookie, 'deployments.create', { tenantId, entryName: n })]);

    const [sharedG, sharedT] = await deploy(`Rules-Shared-${kind}`);
    expect(sharedG).toMatchObject({ code: 'invalid', param: 'endpointName', message: `Rules-Shared-${kind} is offered on the shared surface only` });
    expect(sharedT).toMatchObject({ status: 400, param: 'entryName', message: sharedG.message });

    const first = await gql(member.cookie, DEPLOY, { t: tenantId, n: `Rules-Dedicated-${kind}` });
    expect(first.code).toBeNull();
    const [dupG, dupT] = await deploy(`Rules-Dedicated-${kind}`);
    expect(dupG).toMatchObject({ code: 'conflict', param: 'endpointName' });
    expect(dupT).toMatchObject({ status: 409, param: 'entryName', message: dupG.message });

    const [noneG, noneT] = await deploy(`Rules-Nothing-${kind}`);
    expect(noneG).toMatchObject({ code: 'not_found', param: 'endpointName', message: `catalog entry Rules-Nothing-${kind} not found` });
    expect(noneT).toMatchObject({ status: 404, param: 'entryName', message: noneG.message });

    // Red-team finding: GraphQL took a 900 KB name to the database and echoed it back whole in its not-found error.
    const huge = await gql(member.cookie, DEPLOY, { t: tenantId, n: 'x'.repeat(900_000) });
    expect(huge).toMatchObject({ code: 'invalid', param: 'endpointName', message: 'endpointName must be at most 200 characters' });
  });

  it('refuses a fractional limit naming the field (tRPC; GraphQL Int refuses it while parsing)', async () => {
    const t = await trpc(member.cookie, 'keys.create', { tenantId, name: 'limited', rpmLimit: 1.5 });
    expect(t).toMatchObject({ status: 400, param: 'rpmLimit' });
    const g = await gql(member.cookie, CREATE_KEY, { t: tenantId, rpm: 1.5 });
    expect(g.message).toMatch(/rpm/);
  });
});
