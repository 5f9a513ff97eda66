import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import { addMember } from '../src/modules/tenants/tenants.service.ts';
import { appOn, type RunningApp } from './app-on.ts';
import { buildWorld, PASSWORD, trpc, type World } from './trpc-fixtures.ts';

interface Minted {
  token: { id: string };
  secret: string;
}

/**
 * Finding 4: an owner minted a tenant admin token, was demoted to member, and kept owner rights
 * through the token (and promoted themselves back with it).
 */
describe.each(testBackends())('admin tokens never exceed their creator (%s)', (kind) => {
  let database: TestDatabase;
  let w: World;
  let t: RunningApp;
  let seq = 0;

  beforeAll(async () => {
    database = await createTestDb(kind);
    w = await buildWorld(database.db);
    t = await appOn(database);
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await database?.close();
  });

  const asOwnerA = () => ({ cookie: w.parties.ownerA.cookie!, origin: t.baseUrl });
  /** A second owner of tenant A, logged in, who mints a tenant token over tRPC. */
  async function ownerWithToken() {
    const user = await createUser(database.db, { email: `second-owner-${++seq}@example.com`, password: PASSWORD });
    await addMember(database.db, { tenantId: w.tenantA.id, userId: user.id, role: 'owner' });
    const { token } = await createSession(database.db, user.id);
    const minted = await trpc<Minted>(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'automation', tenantId: w.tenantA.id },
      headers: { cookie: `session=${token}`, origin: t.baseUrl },
    });
    expect(minted.status).toBe(200);
    return { user, bearer: { authorization: `Bearer ${minted.body.result!.data.secret}` }, tokenId: minted.body.result!.data.token.id };
  }
  const listKeys = (headers: Record<string, string>) => trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantA.id }, headers });

  it('demotion revokes the tokens the demoted owner minted; the token cannot promote them back', async () => {
    const { user, bearer, tokenId } = await ownerWithToken();
    expect((await listKeys(bearer)).status).toBe(200);

    const demoted = await trpc(t.baseUrl, 'tenants.members.setRole', {
      mutation: true,
      input: { tenantId: w.tenantA.id, userId: user.id, role: 'member' },
      headers: asOwnerA(),
    });
    expect(demoted.status).toBe(200);

    expect((await listKeys(bearer)).status).toBe(401);
    const promoteBack = await trpc(t.baseUrl, 'tenants.members.setRole', {
      mutation: true,
      input: { tenantId: w.tenantA.id, userId: user.id, role: 'owner' },
      headers: bearer,
    });
    expect(promoteBack.status).toBe(401);
    const membership = await database.db
      .selectFrom('memberships')
      .select('role')
      .where('tenantId', '=', w.tenantA.id)
      .where('userId', '=', user.id)
      .executeTakeFirstOrThrow();
    expect(membership.role).toBe('member');
    const row = await database.db.selectFrom('adminTokens').select('revokedAt').where('id', '=', tokenId).executeTakeFirstOrThrow();
    expect(row.revokedAt).not.toBeNull();
    const audit = await database.db.selectFrom('auditLog').select('detail').where('action', '=', 'membership.role').where('targetId', '=', user.id).execute();
    expect(JSON.stringify(audit)).toContain('"revokedAdminTokens":1');
  });

  it("checks the creator's current role on every use, even when no revocation ran", async () => {
    const { user, bearer, tokenId } = await ownerWithToken();
    expect((await listKeys(bearer)).status).toBe(200);
    // A demotion by a path that revokes nothing (a script, a future service): the token still stops.
    await database.db.updateTable('memberships').set({ role: 'member' }).where('tenantId', '=', w.tenantA.id).where('userId', '=', user.id).execute();
    const refused = await listKeys(bearer);
    expect(refused.status).toBe(401);
    expect(refused.body.error?.message).toMatch(/creator/);
    const create = await trpc(t.baseUrl, 'keys.create', { mutation: true, input: { tenantId: w.tenantA.id, name: 'x' }, headers: bearer });
    expect(create.status).toBe(401);
    expect((await database.db.selectFrom('adminTokens').select('revokedAt').where('id', '=', tokenId).executeTakeFirstOrThrow()).revokedAt).toBeNull();
    // GraphQL resolves the caller the same way.
    const gql = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer },
      body: JSON.stringify({ query: `{ tenant(id: "${w.tenantA.id}") { name } }` }),
    });
    expect(((await gql.json()) as { data?: unknown }).data ?? null).toBeNull();
  });

  it('removal revokes the removed member’s tokens', async () => {
    const { user, bearer, tokenId } = await ownerWithToken();
    const removed = await trpc(t.baseUrl, 'tenants.members.remove', {
      mutation: true,
      input: { tenantId: w.tenantA.id, userId: user.id },
      headers: asOwnerA(),
    });
    expect(removed.status).toBe(200);
    expect((await listKeys(bearer)).status).toBe(401);
    expect((await database.db.selectFrom('adminTokens').select('revokedAt').where('id', '=', tokenId).executeTakeFirstOrThrow()).revokedAt).not.toBeNull();
  });

  it('a platform token stops when its creator is no longer a platform admin', async () => {
    const admin = await createUser(database.db, { email: `ex-admin-${++seq}@example.com`, password: PASSWORD, isPlatformAdmin: true });
    const { token } = await createSession(database.db, admin.id);
    const minted = await trpc<Minted>(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'ops', tenantId: null },
      headers: { cookie: `session=${token}`, origin: t.baseUrl },
    });
    const bearer = { authorization: `Bearer ${minted.body.result!.data.secret}` };
    expect((await trpc(t.baseUrl, 'tenants.all', { headers: bearer })).status).toBe(200);
    await database.db
      .updateTable('users')
      .set({ isPlatformAdmin: sql<boolean>`false` })
      .where('id', '=', admin.id)
      .execute();
    expect((await trpc(t.baseUrl, 'tenants.all', { headers: bearer })).status).toBe(401);
  });
});
