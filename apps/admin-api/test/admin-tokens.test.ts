import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackends } from '@infer/db/testing';
import { hashSecret, SECRET_PREFIX } from '@infer/shared';
import { issueAdminToken, MAX_LIVE_ADMIN_TOKENS_PER_TENANT } from '../src/modules/auth/admin-tokens.service.ts';
import { resolvePrincipal } from '../src/modules/auth/resolve-principal.ts';
import { ServiceError } from '../src/errors.ts';
import { addMember } from '../src/modules/tenants/tenants.service.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import { startTestApp, type TestApp } from './helpers.ts';
import { buildWorld, trpc, type World } from './trpc-fixtures.ts';

interface CreatedToken {
  token: { id: string; prefix: string; tenantId: string | null };
  secret: string;
}

describe.each(testBackends())('admin tokens (%s)', (kind) => {
  let t: TestApp;
  let w: World;
  const origin = () => t.baseUrl;

  beforeAll(async () => {
    t = await startTestApp(kind);
    w = await buildWorld(t.database.db);
  }, 60_000);
  afterAll(async () => t?.close());

  const asAdmin = () => ({ cookie: w.parties.admin.cookie!, origin: origin() });

  it('shows the secret once, stores only its hash, and works as Bearer on tRPC', async () => {
    const created = await trpc<CreatedToken>(t.baseUrl, 'adminTokens.create', { mutation: true, input: { name: 'ci', tenantId: null }, headers: asAdmin() });
    expect(created.status).toBe(200);
    const { token, secret } = created.body.result!.data;
    expect(secret.startsWith(SECRET_PREFIX.admin)).toBe(true);
    expect(token.prefix).toBe(secret.slice(0, 12));

    const row = await t.database.db.selectFrom('adminTokens').select(['hash', 'userId']).where('id', '=', token.id).executeTakeFirstOrThrow();
    expect(row.hash).toBe(hashSecret(secret));
    expect(row.userId).toBe(w.parties.admin.userId);
    expect(JSON.stringify(await t.database.db.selectFrom('adminTokens').selectAll().execute())).not.toContain(secret);
    expect(JSON.stringify(await t.database.db.selectFrom('auditLog').selectAll().execute())).not.toContain(secret);

    const listed = await trpc<unknown[]>(t.baseUrl, 'adminTokens.list', { headers: asAdmin() });
    expect(JSON.stringify(listed.body)).not.toContain(secret);
    expect(JSON.stringify(listed.body)).not.toContain(row.hash);

    // Bearer: no cookie, no Origin needed (automation), even for mutations.
    const bearer = { authorization: `Bearer ${secret}` };
    const me = await trpc<{ kind: string; isPlatformAdmin: boolean }>(t.baseUrl, 'auth.me', { headers: bearer });
    expect(me.body.result?.data).toMatchObject({ kind: 'admin_token', isPlatformAdmin: true });
    const tenant = await trpc<{ id: string }>(t.baseUrl, 'tenants.create', { mutation: true, input: { slug: `auto-${kind}`, name: 'Auto' }, headers: bearer });
    expect(tenant.status).toBe(200);
    const evilOrigin = await trpc(t.baseUrl, 'keys.create', {
      mutation: true,
      input: { tenantId: w.tenantA.id, name: 'bot' },
      headers: { ...bearer, origin: 'https://evil.example' },
    });
    expect(evilOrigin.status).toBe(200);

    const lastUsed = await t.database.db.selectFrom('adminTokens').select('lastUsedAt').where('id', '=', token.id).executeTakeFirstOrThrow();
    expect(lastUsed.lastUsedAt).toBeInstanceOf(Date);
  });

  it('refuses revoked, expired, unknown and malformed tokens with 401 (never as anonymous)', async () => {
    const { db } = t.database;
    const live = await issueAdminToken(db, { name: 'soon revoked', tenantId: null });
    const bearer = { authorization: `Bearer ${live.secret}` };
    expect((await trpc(t.baseUrl, 'tenants.all', { headers: bearer })).status).toBe(200);

    const revoked = await trpc(t.baseUrl, 'adminTokens.revoke', { mutation: true, input: { tokenId: live.token.id }, headers: asAdmin() });
    expect(revoked.status).toBe(200);
    const after = await trpc(t.baseUrl, 'tenants.all', { headers: bearer });
    expect(after.status).toBe(401);
    expect(after.body.error?.data.code).toBe('UNAUTHORIZED');
    // Even public procedures refuse a bad credential rather than falling back to anonymous.
    expect((await trpc(t.baseUrl, 'catalog.list', { headers: bearer })).status).toBe(401);

    const expiring = await issueAdminToken(db, { name: 'expiring', tenantId: null, expiresAt: new Date(Date.now() + 60_000) });
    await db
      .updateTable('adminTokens')
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where('id', '=', expiring.token.id)
      .execute();
    expect((await trpc(t.baseUrl, 'tenants.all', { headers: { authorization: `Bearer ${expiring.secret}` } })).status).toBe(401);

    const forged = `${SECRET_PREFIX.admin}${'A'.repeat(38)}`;
    expect((await trpc(t.baseUrl, 'tenants.all', { headers: { authorization: `Bearer ${forged}` } })).status).toBe(401);
    // An inference key is not an admin token.
    expect((await trpc(t.baseUrl, 'tenants.all', { headers: { authorization: 'Bearer infk_abc' } })).status).toBe(401);
    const err = await resolvePrincipal(db, { authorization: `Bearer ${live.secret}` }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('unauthenticated');
  });

  it('lets tenant owners create tokens for their tenant only, and those act only there', async () => {
    const owner = { cookie: w.parties.ownerA.cookie!, origin: origin() };
    const platform = await trpc(t.baseUrl, 'adminTokens.create', { mutation: true, input: { name: 'x', tenantId: null }, headers: owner });
    expect(platform.status).toBe(403);
    const other = await trpc(t.baseUrl, 'adminTokens.create', { mutation: true, input: { name: 'x', tenantId: w.tenantB.id }, headers: owner });
    expect(other.status).toBe(404);
    const member = await trpc(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'x', tenantId: w.tenantA.id },
      headers: { cookie: w.parties.memberA.cookie!, origin: origin() },
    });
    expect(member.status).toBe(403);

    const created = await trpc<CreatedToken>(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'a-bot', tenantId: w.tenantA.id },
      headers: owner,
    });
    expect(created.status).toBe(200);
    const bearer = { authorization: `Bearer ${created.body.result!.data.secret}` };
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantA.id }, headers: bearer })).status).toBe(200);
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantB.id }, headers: bearer })).status).toBe(404);
    expect((await trpc(t.baseUrl, 'tenants.all', { headers: bearer })).status).toBe(403);
    const mine = await trpc<{ id: string; role: string }[]>(t.baseUrl, 'tenants.mine', { headers: bearer });
    expect(mine.body.result?.data).toEqual([expect.objectContaining({ id: w.tenantA.id, role: 'owner' })]);

    const listed = await trpc<{ id: string; tenantId: string | null }[]>(t.baseUrl, 'adminTokens.list', { input: { tenantId: w.tenantA.id }, headers: owner });
    expect(listed.body.result!.data.every((x) => x.tenantId === w.tenantA.id)).toBe(true);
    expect(listed.body.result!.data.map((x) => x.id)).toContain(created.body.result!.data.token.id);
    expect((await trpc(t.baseUrl, 'adminTokens.list', { headers: owner })).status).toBe(403);
  });

  it('ends the tenant tokens of a member who is removed', async () => {
    const { db } = t.database;
    // Minted while an owner (a tenant token acts as owner, so only an owner's token works at all).
    await addMember(db, { tenantId: w.tenantA.id, userId: w.parties.memberA.userId!, role: 'owner' });
    const token = await issueAdminToken(db, { name: 'left behind', tenantId: w.tenantA.id, userId: w.parties.memberA.userId });
    const bearer = { authorization: `Bearer ${token.secret}` };
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantA.id }, headers: bearer })).status).toBe(200);
    const removed = await trpc(t.baseUrl, 'tenants.members.remove', {
      mutation: true,
      input: { tenantId: w.tenantA.id, userId: w.parties.memberA.userId },
      headers: { cookie: w.parties.ownerA.cookie!, origin: origin() },
    });
    expect(removed.status).toBe(200);
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantA.id }, headers: bearer })).status).toBe(401);
    // The removed member's session no longer reaches the tenant either.
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantA.id }, headers: { cookie: w.parties.memberA.cookie! } })).status).toBe(404);
  });
  // A leaked token's holder must not keep access by minting a successor before the leak is found.
  it('revoking a token revokes every token minted through it, and only those', async () => {
    const { db } = t.database;
    const mint = async (bearerSecret: string, name: string, tenantId: string | null = w.tenantA.id) =>
      trpc<CreatedToken>(t.baseUrl, 'adminTokens.create', { mutation: true, input: { name, tenantId }, headers: { authorization: `Bearer ${bearerSecret}` } });
    const root = await issueAdminToken(db, { name: 'leaked', tenantId: null, userId: w.parties.admin.userId });
    const child = (await mint(root.secret, 'successor')).body.result!.data;
    const grandchild = (await mint(child.secret, 'successor of successor')).body.result!.data;
    const sibling = await trpc<CreatedToken>(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'by session', tenantId: null },
      headers: asAdmin(),
    });
    expect(sibling.status).toBe(200);
    const listed = await trpc<{ id: string; parentTokenId: string | null }[]>(t.baseUrl, 'adminTokens.list', { headers: asAdmin() });
    const parentOf = new Map(listed.body.result!.data.map((x) => [x.id, x.parentTokenId]));
    expect([parentOf.get(child.token.id), parentOf.get(grandchild.token.id), parentOf.get(sibling.body.result!.data.token.id)]).toEqual([
      root.token.id,
      child.token.id,
      null,
    ]);
    const works = async (secret: string) =>
      (await trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantA.id }, headers: { authorization: `Bearer ${secret}` } })).status;
    expect([await works(child.secret), await works(grandchild.secret)]).toEqual([200, 200]);

    const revoked = await trpc(t.baseUrl, 'adminTokens.revoke', { mutation: true, input: { tokenId: root.token.id }, headers: asAdmin() });
    expect(revoked.status).toBe(200);
    expect([await works(root.secret), await works(child.secret), await works(grandchild.secret)]).toEqual([401, 401, 401]);
    expect(await works(sibling.body.result!.data.secret)).toBe(200);
    const audit = await db
      .selectFrom('auditLog')
      .select('detail')
      .where('action', '=', 'admin_token.revoke')
      .where('targetId', '=', root.token.id)
      .executeTakeFirstOrThrow();
    expect(new Set((audit.detail as { revokedDescendants: string[] }).revokedDescendants)).toEqual(new Set([child.token.id, grandchild.token.id]));
  });

  it('holds a tenant to MAX_LIVE_ADMIN_TOKENS_PER_TENANT live tokens; revoked and expired ones take no place', async () => {
    const tenantId = w.tenantB.id;
    const owner = { cookie: w.parties.ownerB.cookie!, origin: origin() };
    const db = t.database.db;
    const live = () =>
      db
        .selectFrom('adminTokens')
        .select('id')
        .where('tenantId', '=', tenantId)
        .where('revokedAt', 'is', null)
        .where((eb) => eb.or([eb('expiresAt', 'is', null), eb('expiresAt', '>', new Date())]))
        .execute();
    const have = (await live()).length;
    for (let i = have; i < MAX_LIVE_ADMIN_TOKENS_PER_TENANT; i++) await issueAdminToken(db, { name: `fill ${i}`, tenantId, userId: w.parties.ownerB.userId });
    const refused = await trpc(t.baseUrl, 'adminTokens.create', { mutation: true, input: { name: 'one more', tenantId }, headers: owner });
    expect(refused.status).toBe(409);
    expect(JSON.stringify(refused.body)).toContain(`a tenant holds at most ${MAX_LIVE_ADMIN_TOKENS_PER_TENANT} live admin tokens`);
    expect((await live()).length).toBe(MAX_LIVE_ADMIN_TOKENS_PER_TENANT);
    // Expiring one frees its place.
    const [one] = await live();
    await db
      .updateTable('adminTokens')
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where('id', '=', one!.id)
      .execute();
    expect((await trpc(t.baseUrl, 'adminTokens.create', { mutation: true, input: { name: 'one more', tenantId }, headers: owner })).status).toBe(200);
    await db.updateTable('adminTokens').set({ revokedAt: new Date() }).where('tenantId', '=', tenantId).where('name', 'like', 'fill %').execute();
  });

  it('a token minted by a token never outlives it', async () => {
    const { db } = t.database;
    const parentExpiry = new Date(Date.now() + 3_600_000);
    const parent = await issueAdminToken(db, { name: 'short-lived', tenantId: w.tenantA.id, userId: w.parties.ownerA.userId, expiresAt: parentExpiry });
    const headers = { authorization: `Bearer ${parent.secret}` };
    const unasked = await trpc<CreatedToken & { token: { expiresAt: string | null } }>(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'no expiry asked', tenantId: w.tenantA.id },
      headers,
    });
    expect(unasked.status).toBe(200);
    expect(new Date(unasked.body.result!.data.token.expiresAt!).getTime()).toBe(parentExpiry.getTime());
    const later = await trpc(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'outlives', tenantId: w.tenantA.id, expiresAt: new Date(parentExpiry.getTime() + 60_000).toISOString() },
      headers,
    });
    expect(later.status).toBe(400);
    expect(JSON.stringify(later.body)).toContain('expiresAt may not be later');
    const sooner = new Date(parentExpiry.getTime() - 60_000);
    const ok = await trpc<CreatedToken & { token: { expiresAt: string | null } }>(t.baseUrl, 'adminTokens.create', {
      mutation: true,
      input: { name: 'sooner', tenantId: w.tenantA.id, expiresAt: sooner.toISOString() },
      headers,
    });
    expect(new Date(ok.body.result!.data.token.expiresAt!).getTime()).toBe(sooner.getTime());
  });

  it('a mint racing its parent’s revocation is either refused or revoked with it', async () => {
    const { db } = t.database;
    for (let round = 0; round < 8; round++) {
      const parent = await issueAdminToken(db, { name: `racing ${round}`, tenantId: null, userId: w.parties.admin.userId });
      const [minted] = await Promise.all([
        trpc<CreatedToken>(t.baseUrl, 'adminTokens.create', {
          mutation: true,
          input: { name: 'racer', tenantId: w.tenantA.id },
          headers: { authorization: `Bearer ${parent.secret}` },
        }),
        trpc(t.baseUrl, 'adminTokens.revoke', { mutation: true, input: { tokenId: parent.token.id }, headers: asAdmin() }),
      ]);
      if (minted.status === 200) {
        const status = (await trpc(t.baseUrl, 'tenants.mine', { headers: { authorization: `Bearer ${minted.body.result!.data.secret}` } })).status;
        expect(status).toBe(401);
      } else {
        expect(minted.status).toBe(401);
      }
    }
    const live = await db
      .selectFrom('adminTokens as c')
      .innerJoin('adminTokens as p', 'p.id', 'c.parentTokenId')
      .select('c.id')
      .where('p.revokedAt', 'is not', null)
      .where('c.revokedAt', 'is', null)
      .execute();
    expect(live).toEqual([]);
  });
  it("removal ends the member's inference keys too (not the others'), and nodes are told", async () => {
    const { db } = t.database;
    const user = await createUser(db, { email: `leaver-${kind}@example.com`, password: 'correct-horse-battery-9' });
    await addMember(db, { tenantId: w.tenantA.id, userId: user.id, role: 'member' });
    const cookie = `session=${(await createSession(db, user.id)).token}`;
    const made = await trpc<{ key: { id: string } }>(t.baseUrl, 'keys.create', {
      mutation: true,
      input: { tenantId: w.tenantA.id, name: 'leaver key' },
      headers: { cookie, origin: origin() },
    });
    expect(made.status).toBe(200);
    const mine = made.body.result!.data.key.id;
    const owners = await trpc<{ key: { id: string } }>(t.baseUrl, 'keys.create', {
      mutation: true,
      input: { tenantId: w.tenantA.id, name: 'stays' },
      headers: { cookie: w.parties.ownerA.cookie!, origin: origin() },
    });
    const theirs = owners.body.result!.data.key.id;
    const before = await db
      .selectFrom('configOutbox')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .executeTakeFirstOrThrow();

    const removed = await trpc(t.baseUrl, 'tenants.members.remove', {
      mutation: true,
      input: { tenantId: w.tenantA.id, userId: user.id },
      headers: { cookie: w.parties.ownerA.cookie!, origin: origin() },
    });
    expect(removed.status).toBe(200);
    const keys = await db.selectFrom('apiKeys').select(['id', 'revokedAt']).where('id', 'in', [mine, theirs]).execute();
    const revoked = new Map(keys.map((k) => [k.id, k.revokedAt !== null]));
    expect([revoked.get(mine), revoked.get(theirs)]).toEqual([true, false]);
    // The change reaches the data plane through the outbox, in the same transaction as the removal.
    const changes = await db
      .selectFrom('configOutbox')
      .select(['kind', 'entityId'])
      .where('seq', '>', Number(before.seq ?? 0))
      .execute();
    expect(changes).toContainEqual({ kind: 'key', entityId: mine });
    const audit = await db
      .selectFrom('auditLog')
      .select('detail')
      .where('action', '=', 'membership.remove')
      .where('targetId', '=', user.id)
      .executeTakeFirstOrThrow();
    expect(audit.detail).toMatchObject({ revokedApiKeys: 1 });
  });
});
