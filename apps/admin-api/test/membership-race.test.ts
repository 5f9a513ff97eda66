// A creation racing the removal or demotion of its caller, on PostgreSQL (PGlite runs one transaction at a time, so the
// race needs a server). Red-team finding: a member firing key creations while an owner removed them kept four live
// keys. The caller's rights were read when the request was authenticated; the removal's revocations ran before the
// creations (queued behind it on the tenant's row) committed with the membership they no longer had.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import type { Principal } from '../src/modules/access/principal.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { issueApiKey } from '../src/modules/keys/keys.service.ts';
import { answerInvitation, inviteMember } from '../src/modules/tenants/invitations.service.ts';
import { addMember, createTenant, removeMember, removeTenantMember, setMemberRole } from '../src/modules/tenants/tenants.service.ts';

// Runs where the suite has a server (CI sets DATABASE_URL, as .ci/run does for every database suite).
const onServer = testBackends().includes('postgres');

describe('a creation racing its caller’s removal or demotion (PostgreSQL)', () => {
  let database: TestDatabase;
  let seq = 0;

  beforeAll(async () => {
    if (!onServer) return;
    database = await createTestDb('postgres');
  }, 60_000);
  afterAll(async () => database?.close());

  const waitingOnLocks = async (): Promise<number> =>
    (
      await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(
        database.db,
      )
    ).rows[0]!.n;

  /** A user with `role` in the tenant, and the principal a request of theirs resolved before the change. */
  async function person(tenantId: string, role: 'owner' | 'member'): Promise<{ userId: string; principal: Principal }> {
    const u = await createUser(database.db, { email: `race-${++seq}@example.com`, password: 'long enough password' });
    await addMember(database.db, { tenantId, userId: u.id, role });
    return {
      userId: u.id,
      principal: { kind: 'user', userId: u.id, email: u.email, isPlatformAdmin: false, memberships: new Map([[tenantId, role]]), sessionId: 's' },
    };
  }

  /** Runs `create` while a transaction holds the tenant's row; `change` runs in that transaction once `create` waits on it. */
  async function race<T>(tenantId: string, create: () => Promise<T>, change: (trx: typeof database.db) => Promise<unknown>): Promise<PromiseSettledResult<T>> {
    let creating: Promise<T> | undefined;
    await database.db.transaction().execute(async (trx) => {
      await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).forUpdate().execute();
      creating = create();
      for (let i = 0; (await waitingOnLocks()) === 0; i++) {
        if (i > 500) throw new Error('the creation never waited on the tenant');
        await new Promise((r) => setTimeout(r, 10));
      }
      await change(trx);
    });
    return (await Promise.allSettled([creating!]))[0]!;
  }

  it.runIf(onServer)('a key a removed member was creating is refused, not left live', async () => {
    const tenantId = (await createTenant(database.db, { slug: `race-keys-${seq}`, name: 'Race' })).id;
    const member = await person(tenantId, 'member');
    await person(tenantId, 'owner');
    const outcome = await race(
      tenantId,
      () => issueApiKey(database.db, member.principal, { tenantId, name: 'late' }),
      (trx) => removeMember(trx, { tenantId, userId: member.userId }),
    );
    expect(outcome).toMatchObject({ status: 'rejected', reason: { code: 'not_found' } });
    const live = await database.db.selectFrom('apiKeys').select('id').where('createdBy', '=', member.userId).where('revokedAt', 'is', null).execute();
    expect(live).toEqual([]);
  });

  it.runIf(onServer)('an owner being removed can neither promote an accomplice nor remove the other owner', async () => {
    // Review finding: the owner-only membership changes checked the caller's role from authentication only; queued
    // behind the caller's removal, a promotion of an alt account went through, and the alt account held the tenant.
    const tenantId = (await createTenant(database.db, { slug: `race-members-${seq}`, name: 'Race' })).id;
    const leaving = await person(tenantId, 'owner');
    const keeper = await person(tenantId, 'owner');
    const alt = await person(tenantId, 'member');
    const promote = await race(
      tenantId,
      () => setMemberRole(database.db, leaving.principal, { tenantId, userId: alt.userId, role: 'owner' }),
      (trx) => removeMember(trx, { tenantId, userId: leaving.userId }),
    );
    expect(promote).toMatchObject({ status: 'rejected', reason: { code: 'not_found' } });
    const coup = await race(
      tenantId,
      () => removeTenantMember(database.db, leaving.principal, { tenantId, userId: keeper.userId }),
      async () => undefined, // already removed: the principal still says owner
    );
    expect(coup).toMatchObject({ status: 'rejected', reason: { code: 'not_found' } });
    const roles = await database.db.selectFrom('memberships').select(['userId', 'role']).where('tenantId', '=', tenantId).orderBy('role').execute();
    expect(roles).toEqual(
      expect.arrayContaining([
        { userId: keeper.userId, role: 'owner' },
        { userId: alt.userId, role: 'member' },
      ]),
    );
    expect(roles).toHaveLength(2);
  });

  it.runIf(onServer)('accepting an invitation waits on its sender’s removal instead of deadlocking with it', async () => {
    // Review finding: the accept locked the invitation, then (inserting the membership) the tenant; a removal locks the
    // tenant, then withdraws its owner's invitations: each held what the other waited for.
    const tenantId = (await createTenant(database.db, { slug: `race-accept-${seq}`, name: 'Race' })).id;
    const sender = await person(tenantId, 'owner');
    await person(tenantId, 'owner');
    const invitee = await createUser(database.db, { email: `race-invitee-${++seq}@example.com`, password: 'long enough password' });
    const sent = await inviteMember(database.db, sender.principal, { tenantId, email: invitee.email, role: 'owner' });
    const inviteePrincipal: Principal = {
      kind: 'user',
      userId: invitee.id,
      email: invitee.email,
      isPlatformAdmin: false,
      memberships: new Map(),
      sessionId: 's',
    };
    const invitationLocksHeld = async (): Promise<number> =>
      (
        await sql<{ n: number }>`select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation
          where c.relname = 'invitations' and l.mode in ('RowShareLock', 'RowExclusiveLock') and l.granted and l.pid <> pg_backend_pid()
            and l.pid in (select pid from pg_stat_activity where datname = current_database())`.execute(database.db)
      ).rows[0]!.n;
    let heldWhileWaiting = -1;
    const outcome = await race(
      tenantId,
      () => answerInvitation(database.db, inviteePrincipal, { token: sent.token }, true),
      async (trx) => {
        // The accept waits on the tenant having locked nothing of the invitation's (FOR UPDATE or UPDATE).
        heldWhileWaiting = await invitationLocksHeld();
        await removeMember(trx, { tenantId, userId: sender.userId });
      },
    );
    expect(heldWhileWaiting).toBe(0);
    expect(outcome).toMatchObject({ status: 'rejected', reason: { code: 'conflict', message: 'this invitation was already revoked' } });
    expect(await database.db.selectFrom('memberships').select('userId').where('tenantId', '=', tenantId).where('userId', '=', invitee.id).execute()).toEqual(
      [],
    );
  });

  it.runIf(onServer)('an invitation a demoted owner was sending is refused, not left open', async () => {
    const tenantId = (await createTenant(database.db, { slug: `race-invites-${seq}`, name: 'Race' })).id;
    const demoted = await person(tenantId, 'owner');
    const keeper = await person(tenantId, 'owner');
    const outcome = await race(
      tenantId,
      () => inviteMember(database.db, demoted.principal, { tenantId, email: 'alt@example.com', role: 'owner' }),
      (trx) => setMemberRole(trx, keeper.principal, { tenantId, userId: demoted.userId, role: 'member' }),
    );
    expect(outcome).toMatchObject({ status: 'rejected', reason: { code: 'forbidden' } });
    const open = await database.db.selectFrom('invitations').select('id').where('invitedBy', '=', demoted.userId).where('status', '=', 'pending').execute();
    expect(open).toEqual([]);
  });
});
