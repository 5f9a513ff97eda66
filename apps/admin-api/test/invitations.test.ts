// Finding 9: adding members by email told an owner whether an account existed and added people
// without their consent. These tests make the enumeration attempt and the consent checks over HTTP
// on both transports.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp } from '../src/app.ts';
import { listAudit } from '../src/modules/audit/audit.service.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import { MAX_OPEN_INVITATIONS_PER_TENANT } from '../src/modules/tenants/invitations.service.ts';
import { addMember, createTenant, getMembership } from '../src/modules/tenants/tenants.service.ts';
import { NODE_TOKEN } from './helpers.ts';

const CONSOLE = 'http://console.test';

interface Who {
  readonly cookie: string;
  readonly userId: string;
  readonly email: string;
}

interface Reply {
  status: number;
  // Parsed JSON bodies: the assertions check their values, property paths vary by procedure.

  data: any;
  code: string | null;
  param: string | null;
  message: string | null;
}

describe.each(testBackends())('tenant invitations (%s)', (kind) => {
  let database: TestDatabase;
  let app: FastifyInstance;
  let baseUrl: string;
  let tenantA: string;
  let tenantB: string;
  let ownerA: Who;
  let memberA: Who;
  let ownerB: Who;
  let seq = 0;

  const headers = (who: Who): Record<string, string> => ({ 'content-type': 'application/json', cookie: `session=${who.cookie}`, origin: CONSOLE });

  async function trpc(who: Who, path: string, input: unknown, mutation = true): Promise<Reply> {
    const url = new URL(`${baseUrl}/trpc/${path}`);
    if (!mutation) url.searchParams.set('input', JSON.stringify(input));
    const res = await fetch(url, mutation ? { method: 'POST', headers: headers(who), body: JSON.stringify(input) } : { headers: headers(who) });
    const body = (await res.json()) as { result?: { data: unknown }; error?: { message: string; data: { code: string; param: string | null } } };
    return {
      status: res.status,
      data: body.result?.data ?? null,
      code: body.error?.data.code ?? null,
      param: body.error?.data.param ?? null,
      message: body.error?.message ?? null,
    };
  }

  async function gql(who: Who, query: string, variables: Record<string, unknown> = {}): Promise<Reply> {
    const res = await fetch(`${baseUrl}/graphql`, { method: 'POST', headers: headers(who), body: JSON.stringify({ query, variables }) });

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

  async function user(label: string): Promise<Who> {
    const email = `${label}-${++seq}@example.com`;
    const u = await createUser(database.db, { email, password: 'long enough password' });
    return { cookie: (await createSession(database.db, u.id)).token, userId: u.id, email };
  }

  const INVITE = `mutation($t: ID!, $e: String!, $r: TenantRole) { inviteMember(tenantId: $t, email: $e, role: $r) { invitationId email role expiresAt token } }`;

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
    tenantA = (await createTenant(database.db, { slug: `inv-a-${kind}`, name: 'A' })).id;
    tenantB = (await createTenant(database.db, { slug: `inv-b-${kind}`, name: 'B' })).id;
    ownerA = await user('owner-a');
    memberA = await user('member-a');
    ownerB = await user('owner-b');
    await addMember(database.db, { tenantId: tenantA, userId: ownerA.userId, role: 'owner' });
    await addMember(database.db, { tenantId: tenantA, userId: memberA.userId, role: 'member' });
    await addMember(database.db, { tenantId: tenantB, userId: ownerB.userId, role: 'owner' });
  });

  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  /** The reply with the per-invitation values masked: what an owner could compare. */
  const shape = (r: Reply, root: string | null) => {
    const d = root ? r.data?.[root] : r.data;
    return {
      status: r.status,
      code: r.code,
      keys: Object.keys(d ?? {}).sort(),
      role: d?.role,
      expiresInDays: Math.round((Date.parse(d?.expiresAt) - Date.now()) / 86_400_000),
    };
  };

  it('answers the same whether or not the email has an account, and adds nobody (tRPC members.add)', async () => {
    const existing = await user('existing');
    const ghost = `nobody-${++seq}@example.com`;
    const a = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: existing.email, role: 'member' });
    const b = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: ghost, role: 'member' });
    expect(a.code).toBeNull();
    expect(shape(a, null)).toEqual(shape(b, null));
    expect(a.data.email).toBe(existing.email);
    expect(b.data.email).toBe(ghost);
    // Already a member: still the same reply, and the role is not changed behind their back.
    const c = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: memberA.email, role: 'owner' });
    expect(shape(c, null)).toEqual({ ...shape(a, null), role: 'owner' });
    expect((await getMembership(database.db, tenantA, memberA.userId))?.role).toBe('member');

    expect(await getMembership(database.db, tenantA, existing.userId)).toBeNull();
    const mine = await trpc(existing, 'tenants.mine', undefined, false);
    expect(mine.data.map((t: { id: string }) => t.id)).not.toContain(tenantA);
  });

  it('answers the same whether or not the email has an account, and adds nobody (GraphQL inviteMember)', async () => {
    const existing = await user('existing-gql');
    const a = await gql(ownerA, INVITE, { t: tenantA, e: existing.email, r: 'MEMBER' });
    const b = await gql(ownerA, INVITE, { t: tenantA, e: `ghost-${++seq}@example.com`, r: 'MEMBER' });
    expect(a.code).toBeNull();
    expect(shape(a, 'inviteMember')).toEqual(shape(b, 'inviteMember'));
    expect(await getMembership(database.db, tenantA, existing.userId)).toBeNull();
    const viewer = await gql(existing, `{ viewer { tenants { id } } }`);
    expect(viewer.data.viewer.tenants).toEqual([]);
  });

  it('lets the invitee list and accept (GraphQL); the membership and audit rows follow', async () => {
    const invitee = await user('invitee');
    const sent = await gql(ownerA, INVITE, { t: tenantA, e: invitee.email.toUpperCase(), r: 'MEMBER' });
    const id = sent.data.inviteMember.invitationId as string;

    const listed = await gql(invitee, `{ viewer { invitations { id tenantId tenantName role invitedByEmail } } }`);
    expect(listed.data.viewer.invitations).toEqual([{ id, tenantId: tenantA, tenantName: 'A', role: 'MEMBER', invitedByEmail: ownerA.email }]);
    const owners = await gql(ownerA, `query($t: ID!) { tenant(id: $t) { invitations { id email } } }`, { t: tenantA });
    expect(owners.data.tenant.invitations).toContainEqual({ id, email: invitee.email });

    const accepted = await gql(invitee, `mutation($id: ID!) { acceptInvitation(id: $id) { status role tenantId } }`, { id });
    expect(accepted.data.acceptInvitation).toEqual({ status: 'ACCEPTED', role: 'MEMBER', tenantId: tenantA });
    expect((await getMembership(database.db, tenantA, invitee.userId))?.role).toBe('member');
    const again = await gql(invitee, `mutation($id: ID!) { acceptInvitation(id: $id) { status } }`, { id });
    expect(again.code).toBe('conflict');

    const audit = await listAudit(database.db, { tenantId: tenantA, limit: 500 });
    const actions = audit
      .filter((r) => r.targetId === id || r.targetId === invitee.userId)
      .map((r) => r.action)
      .sort();
    expect(actions).toEqual(['invitation.accept', 'invitation.create', 'membership.add']);
    expect(audit.find((r) => r.action === 'invitation.create' && r.targetId === id)?.actorUserId).toBe(ownerA.userId);
  });

  it('lets the invitee decline (tRPC): nobody becomes a member without accepting', async () => {
    const invitee = await user('decliner');
    const sent = await trpc(ownerA, 'tenants.invitations.create', { tenantId: tenantA, email: invitee.email, role: 'owner' });
    const mine = await trpc(invitee, 'tenants.invitations.mine', undefined, false);
    expect(mine.data.map((i: { id: string }) => i.id)).toEqual([sent.data.invitationId]);
    const declined = await trpc(invitee, 'tenants.invitations.decline', { invitationId: sent.data.invitationId });
    expect(declined.data).toMatchObject({ status: 'declined', role: null });
    expect(await getMembership(database.db, tenantA, invitee.userId)).toBeNull();
    expect((await trpc(invitee, 'tenants.invitations.accept', { invitationId: sent.data.invitationId })).code).toBe('CONFLICT');
    expect(await getMembership(database.db, tenantA, invitee.userId)).toBeNull();
  });

  it('accepts through the token of an invitation link, only for the invited email', async () => {
    const invitee = await user('linked');
    const sent = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: invitee.email });
    const token = sent.data.token as string;
    const stored = await database.db.selectFrom('invitations').select('tokenHash').where('id', '=', sent.data.invitationId).executeTakeFirstOrThrow();
    expect(stored.tokenHash).not.toContain(token);
    expect(stored.tokenHash).toMatch(/^[0-9a-f]{64}$/);

    // Someone else logged in (owner of another tenant) holding the link: not found, no membership.
    const stolen = await trpc(ownerB, 'tenants.invitations.accept', { token });
    expect(stolen.code).toBe('NOT_FOUND');
    expect(await getMembership(database.db, tenantA, ownerB.userId)).toBeNull();
    const ok = await trpc(invitee, 'tenants.invitations.accept', { token });
    expect(ok.data).toMatchObject({ status: 'accepted', role: 'member', tenantId: tenantA });
  });

  it("keeps tenant B out of tenant A's invitations", async () => {
    const invitee = await user('private');
    const sent = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: invitee.email });
    const id = sent.data.invitationId as string;

    expect((await trpc(ownerB, 'tenants.invitations.list', { tenantId: tenantA }, false)).code).toBe('NOT_FOUND');
    expect((await gql(ownerB, `query($t: ID!) { tenant(id: $t) { invitations { id } } }`, { t: tenantA })).code).toBe('not_found');
    expect((await trpc(ownerB, 'tenants.invitations.revoke', { tenantId: tenantA, invitationId: id })).code).toBe('NOT_FOUND');
    // Through B's own tenant: the id does not belong there.
    expect((await trpc(ownerB, 'tenants.invitations.revoke', { tenantId: tenantB, invitationId: id })).code).toBe('NOT_FOUND');
    expect((await gql(ownerB, `mutation($t: ID!, $id: ID!) { revokeInvitation(tenantId: $t, id: $id) }`, { t: tenantB, id })).code).toBe('not_found');
    expect((await trpc(ownerB, 'tenants.invitations.mine', undefined, false)).data.map((i: { id: string }) => i.id)).not.toContain(id);
    expect((await gql(ownerB, `mutation($id: ID!) { acceptInvitation(id: $id) { status } }`, { id })).code).toBe('not_found');
    expect(await getMembership(database.db, tenantA, ownerB.userId)).toBeNull();
    // A member who is not an owner cannot invite or see invitations either.
    expect((await trpc(memberA, 'tenants.members.add', { tenantId: tenantA, email: 'x@example.com' })).code).toBe('FORBIDDEN');
    expect((await trpc(memberA, 'tenants.invitations.list', { tenantId: tenantA }, false)).code).toBe('FORBIDDEN');

    const pending = await trpc(invitee, 'tenants.invitations.mine', undefined, false);
    expect(pending.data.map((i: { id: string }) => i.id)).toContain(id);
  });

  it('lets owners revoke; a revoked or expired invitation cannot be accepted', async () => {
    const revoked = await user('revoked');
    const r = await gql(ownerA, INVITE, { t: tenantA, e: revoked.email });
    const rid = r.data.inviteMember.invitationId as string;
    expect((await gql(ownerA, `mutation($t: ID!, $id: ID!) { revokeInvitation(tenantId: $t, id: $id) }`, { t: tenantA, id: rid })).data).toEqual({
      revokeInvitation: true,
    });
    expect((await trpc(ownerA, 'tenants.invitations.list', { tenantId: tenantA }, false)).data.map((i: { id: string }) => i.id)).not.toContain(rid);
    expect((await trpc(revoked, 'tenants.invitations.accept', { invitationId: rid })).code).toBe('CONFLICT');
    expect(await getMembership(database.db, tenantA, revoked.userId)).toBeNull();

    const late = await user('late');
    const e = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: late.email });
    await database.db
      .updateTable('invitations')
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where('id', '=', e.data.invitationId)
      .execute();
    expect((await trpc(late, 'tenants.invitations.mine', undefined, false)).data).toEqual([]);
    const expired = await trpc(late, 'tenants.invitations.accept', { invitationId: e.data.invitationId });
    expect(expired).toMatchObject({ code: 'BAD_REQUEST', param: 'invitationId' });
    expect(await getMembership(database.db, tenantA, late.userId)).toBeNull();

    const audit = await listAudit(database.db, { tenantId: tenantA, action: 'invitation.revoke' });
    expect(audit.map((a) => a.targetId)).toContain(rid);
  });

  it("ends an owner's open invitations with their right to send them: demoted or removed, none can be accepted", async () => {
    // Red-team finding: an owner about to be removed invited an alt account as owner; accepted after the removal, the
    // alt account took the tenant back and demoted the remaining owner.
    const tenant = (await createTenant(database.db, { slug: `inv-c-${kind}`, name: 'C' })).id;
    const [keeper, demoted, removed] = [await user('keeper'), await user('demoted'), await user('removed')];
    for (const o of [keeper, demoted, removed]) await addMember(database.db, { tenantId: tenant, userId: o.userId, role: 'owner' });
    const [alt1, alt2, welcome] = [await user('alt1'), await user('alt2'), await user('welcome')];
    const invite = async (from: Who, to: Who, role: 'owner' | 'member') => {
      const sent = await trpc(from, 'tenants.members.add', { tenantId: tenant, email: to.email, role });
      expect(sent.status).toBe(200);
      return sent.data.token as string;
    };
    const fromDemoted = await invite(demoted, alt1, 'owner');
    const fromRemoved = await invite(removed, alt2, 'member');
    const fromKeeper = await invite(keeper, welcome, 'owner');

    expect((await trpc(keeper, 'tenants.members.setRole', { tenantId: tenant, userId: demoted.userId, role: 'member' })).status).toBe(200);
    expect((await trpc(keeper, 'tenants.members.remove', { tenantId: tenant, userId: removed.userId })).status).toBe(200);

    const late1 = await trpc(alt1, 'tenants.invitations.accept', { token: fromDemoted });
    expect(late1).toMatchObject({ code: 'CONFLICT', message: 'this invitation was already revoked' });
    expect((await trpc(alt2, 'tenants.invitations.accept', { token: fromRemoved })).code).toBe('CONFLICT');
    expect(await getMembership(database.db, tenant, alt1.userId)).toBeNull();
    expect(await getMembership(database.db, tenant, alt2.userId)).toBeNull();
    expect((await getMembership(database.db, tenant, keeper.userId))?.role).toBe('owner');
    // An owner who still is one: their invitation holds.
    expect((await trpc(welcome, 'tenants.invitations.accept', { token: fromKeeper })).data).toMatchObject({ status: 'accepted', role: 'owner' });

    const audit = await listAudit(database.db, { tenantId: tenant, limit: 50 });
    expect(audit.find((a) => a.action === 'membership.role')?.detail).toMatchObject({ withdrawnInvitations: 1 });
    expect(audit.find((a) => a.action === 'membership.remove')?.detail).toMatchObject({ withdrawnInvitations: 1 });
  });

  it("invites a new tenant's first owner instead of adding them, with the same reply for any email", async () => {
    const adminUser = await createUser(database.db, { email: `admin-${++seq}@example.com`, password: 'long enough password', isPlatformAdmin: true });
    const admin: Who = { cookie: (await createSession(database.db, adminUser.id)).token, userId: adminUser.id, email: adminUser.email };
    const future = await user('future-owner');
    const a = await trpc(admin, 'tenants.create', { slug: `first-owner-${kind}-${++seq}`, name: 'First', ownerEmail: future.email });
    const b = await gql(admin, `mutation($s: String!, $e: String) { createTenant(slug: $s, name: "Second", ownerEmail: $e) { id } }`, {
      s: `first-owner-${kind}-${++seq}`,
      e: `nobody-${++seq}@example.com`,
    });
    expect(a.code).toBeNull();
    expect(b.code).toBeNull();
    expect(await getMembership(database.db, a.data.id, future.userId)).toBeNull();
    const mine = await trpc(future, 'tenants.invitations.mine', undefined, false);
    expect(mine.data).toEqual([expect.objectContaining({ tenantId: a.data.id, role: 'owner' })]);
    await trpc(future, 'tenants.invitations.accept', { invitationId: mine.data[0].id });
    expect((await getMembership(database.db, a.data.id, future.userId))?.role).toBe('owner');
  });

  it('names the field of a bad email or role on both transports', async () => {
    const t = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: 'not an email' });
    expect(t).toMatchObject({ status: 400, code: 'BAD_REQUEST', param: 'email' });
    const nul = await trpc(ownerA, 'tenants.members.add', { tenantId: tenantA, email: 'a\u0000@b.c' });
    expect(nul).toMatchObject({ status: 400, param: 'email' });
    const g = await gql(ownerA, INVITE, { t: tenantA, e: 'no-at-sign' });
    expect(g).toMatchObject({ code: 'invalid', param: 'email' });
    expect(g.message).toMatch(/email/);
  });

  it('holds a tenant to MAX_OPEN_INVITATIONS_PER_TENANT open invitations; renewals, expired and withdrawn ones take no new place', async () => {
    const capped = (await createTenant(database.db, { slug: `inv-cap-${kind}`, name: 'Capped' })).id;
    const owner = await user('cap-owner');
    await addMember(database.db, { tenantId: capped, userId: owner.userId, role: 'owner' });
    // All but one place taken directly (inviting a thousand through the API is slow, not different).
    await sql`insert into invitations (tenant_id, email, role, token_hash, expires_at)
      select ${capped}, 'bulk-' || g || '@example.com', 'member', md5(${capped}::text || g), now() + interval '1 day'
      from generate_series(1, ${MAX_OPEN_INVITATIONS_PER_TENANT - 1}) g`.execute(database.db);
    await sql`insert into invitations (tenant_id, email, role, token_hash, expires_at)
      values (${capped}, 'expired@example.com', 'member', md5(${capped}::text || 'x'), now() - interval '1 day')`.execute(database.db);

    const last = await gql(owner, INVITE, { t: capped, e: 'the-last-place@example.com' });
    expect(last.code).toBeNull();
    const refused = await gql(owner, INVITE, { t: capped, e: 'one-too-many@example.com' });
    expect(refused).toMatchObject({
      status: 200,
      code: 'conflict',
      message: `a tenant holds at most ${MAX_OPEN_INVITATIONS_PER_TENANT} open invitations: withdraw ones no longer wanted first`,
    });
    const refusedTrpc = await trpc(owner, 'tenants.invitations.create', { tenantId: capped, email: 'one-too-many@example.com' });
    expect(refusedTrpc).toMatchObject({ status: 409, code: 'CONFLICT' });
    // Nothing half-written: no row and no audit row for the refused email.
    const rows = await database.db.selectFrom('invitations').select('id').where('email', '=', 'one-too-many@example.com').execute();
    expect(rows).toEqual([]);
    // Renewing an open invitation takes no new place; neither does inviting the expired address again (it renews that row).
    expect((await gql(owner, INVITE, { t: capped, e: 'bulk-7@example.com', r: 'OWNER' })).code).toBeNull();
    expect((await gql(owner, INVITE, { t: capped, e: 'the-last-place@example.com' })).code).toBeNull();
    // Withdrawing one frees its place.
    const withdrawn = await gql(owner, `mutation($t: ID!, $id: ID!) { revokeInvitation(tenantId: $t, id: $id) }`, {
      t: capped,
      id: last.data.inviteMember.invitationId,
    });
    expect(withdrawn.code).toBeNull();
    expect((await gql(owner, INVITE, { t: capped, e: 'one-too-many@example.com' })).code).toBeNull();
    // Another tenant's places are its own.
    expect((await gql(ownerB, INVITE, { t: tenantB, e: `elsewhere-${++seq}@example.com` })).code).toBeNull();
  });
});
