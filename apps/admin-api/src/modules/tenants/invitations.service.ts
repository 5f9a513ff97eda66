// Tenant membership needs the invitee's consent (security finding 9). An owner invites an email; the
// reply never says whether an account has that email, and nobody becomes a member until the user
// logged in with that email accepts.
import { sql } from 'kysely';
import type { InvitationStatus, MembershipRole } from '@infer/db';
import { generateSecret, hashSecret } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { notFound, ServiceError } from '../../errors.ts';
import { requireAuthenticated, requireTenantRole } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { storedRights, storedRightsReach } from '../access/stored-rights.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { checkTenantQuota } from './tenant-quota.ts';

/** How long an invitation can be accepted. */
export const INVITATION_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/** Open (pending, unexpired) invitations a tenant may hold at once; renewing one does not take a new place. */
export const MAX_OPEN_INVITATIONS_PER_TENANT = 1000;
const TOKEN_PREFIX = 'infi_';
const EMAIL = /^[^\s@\p{Cc}]+@[^\s@\p{Cc}]+$/u;
const ROLES: readonly MembershipRole[] = ['owner', 'member'];

/**
 * The owner's reply to an invitation: the same shape and values whether or not the email has an
 * account or is already a member. `token` is shown this once (stored hashed) for an invitation link.
 */
export interface InvitationSent {
  invitationId: string;
  email: string;
  role: MembershipRole;
  expiresAt: Date;
  token: string;
}

/** A pending invitation as the tenant's owners list it. */
export interface TenantInvitation {
  id: string;
  email: string;
  role: MembershipRole;
  invitedByEmail: string | null;
  createdAt: Date;
  expiresAt: Date;
}

/** A pending invitation as its invitee lists it. */
export interface MyInvitation {
  id: string;
  tenantId: string;
  tenantSlug: string;
  tenantName: string;
  role: MembershipRole;
  invitedByEmail: string | null;
  createdAt: Date;
  expiresAt: Date;
}

export interface InvitationAnswer {
  invitationId: string;
  tenantId: string;
  status: Extract<InvitationStatus, 'accepted' | 'declined'>;
  /** The caller's role in the tenant after answering; null when declined and not a member. */
  role: MembershipRole | null;
}

function normaliseEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  if (email.length < 3 || email.length > 320 || !EMAIL.test(email)) {
    throw new ServiceError('invalid', 'email must be an email address', 'email');
  }
  return email;
}

function checkRole(role: string): MembershipRole {
  if (!ROLES.includes(role as MembershipRole)) throw new ServiceError('invalid', 'role must be owner or member', 'role');
  return role as MembershipRole;
}

/**
 * Invites an email to a tenant (owners). Inviting the same email again renews the open invitation
 * (new token, role and expiry). Nothing here reads the users table, so neither the reply nor its
 * timing depends on whether the account exists.
 */
export async function inviteMember(
  db: Db,
  principal: Principal,
  input: { readonly tenantId: string; readonly email: string; readonly role?: string },
): Promise<InvitationSent> {
  requireTenantRole(principal, input.tenantId, 'owner');
  return createInvitation(db, { ...input, actor: actorOf(principal) });
}

/**
 * Writes (or renews) an invitation and its audit row, inside the caller's transaction when there is
 * one. The caller has checked the right to invite; `createTenant` uses it for a first owner.
 */
export async function createInvitation(
  db: Db,
  input: { readonly tenantId: string; readonly email: string; readonly role?: string; readonly actor?: Actor },
): Promise<InvitationSent> {
  const email = normaliseEmail(input.email);
  const role = checkRole(input.role ?? 'member');
  const token = generateSecret(TOKEN_PREFIX);
  const tokenHash = hashSecret(token);
  const expiresAt = new Date(Date.now() + INVITATION_TTL_MS);
  const invitedBy = input.actor?.userId ?? null;
  if (!isUuid(input.tenantId)) throw notFound('tenant');
  return withTransaction(db, async (trx) => {
    await checkTenantQuota(
      trx,
      input.tenantId,
      {
        max: MAX_OPEN_INVITATIONS_PER_TENANT,
        what: 'open invitations',
        free: 'withdraw ones no longer wanted first',
        count: async () => {
          const open = await trx
            .selectFrom('invitations')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('tenantId', '=', input.tenantId)
            .where('status', '=', 'pending')
            .where('expiresAt', '>', sql<Date>`now()`)
            .where('email', '<>', email)
            .executeTakeFirstOrThrow();
          return Number(open.n);
        },
      },
      { userId: invitedBy, role: 'owner' },
    );
    const row = await trx
      .insertInto('invitations')
      .values({ tenantId: input.tenantId, email, role, tokenHash, invitedBy, expiresAt })
      .onConflict((oc) => oc.columns(['tenantId', 'email']).where('status', '=', 'pending').doUpdateSet({ role, tokenHash, invitedBy, expiresAt }))
      .returning(['id', 'expiresAt'])
      .executeTakeFirstOrThrow();
    await writeAudit(trx, {
      actor: input.actor,
      tenantId: input.tenantId,
      action: 'invitation.create',
      targetType: 'invitation',
      targetId: row.id,
      detail: { email, role },
    });
    return { invitationId: row.id, email, role, expiresAt: row.expiresAt, token };
  });
}

/** The tenant's open invitations (owners), newest first; expired ones are left out. */
export async function listTenantInvitations(db: Db, principal: Principal, tenantId: string): Promise<TenantInvitation[]> {
  requireTenantRole(principal, tenantId, 'owner');
  return db
    .selectFrom('invitations as i')
    .leftJoin('users as u', 'u.id', 'i.invitedBy')
    .select(['i.id', 'i.email', 'i.role', 'u.email as invitedByEmail', 'i.createdAt', 'i.expiresAt'])
    .where('i.tenantId', '=', tenantId)
    .where('i.status', '=', 'pending')
    .where('i.expiresAt', '>', sql<Date>`now()`)
    .orderBy('i.createdAt', 'desc')
    .execute();
}

/**
 * Withdraws the open invitations `userId` sent for `tenantId` when the user can no longer invite there (no longer an
 * owner or a platform admin): the membership change paths (demotion, removal) call it inside their transaction, so an
 * invitation cannot outlive its sender's right to it (an owner's invitation accepted after the sender lost the tenant
 * would make its recipient an owner). Returns the ids withdrawn (for the audit row).
 */
export async function revokeInvitationsBeyondRole(trx: Db, input: { readonly tenantId: string; readonly userId: string }): Promise<string[]> {
  if (storedRightsReach(await storedRights(trx, input), 'owner')) return [];
  const rows = await trx
    .updateTable('invitations')
    .set({ status: 'revoked', respondedAt: sql<Date>`now()` })
    .where('tenantId', '=', input.tenantId)
    .where('invitedBy', '=', input.userId)
    .where('status', '=', 'pending')
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

/** Withdraws an open invitation (owners); one of another tenant is "not found". */
export async function revokeInvitation(db: Db, principal: Principal, ref: { readonly tenantId: string; readonly invitationId: string }): Promise<void> {
  requireTenantRole(principal, ref.tenantId, 'owner');
  if (!isUuid(ref.invitationId)) throw notFound('invitation');
  await withTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('invitations')
      .set({ status: 'revoked', respondedAt: sql<Date>`now()` })
      .where('id', '=', ref.invitationId)
      .where('tenantId', '=', ref.tenantId)
      .where('status', '=', 'pending')
      .returning(['id', 'email'])
      .executeTakeFirst();
    if (!row) throw notFound('invitation');
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: ref.tenantId,
      action: 'invitation.revoke',
      targetType: 'invitation',
      targetId: row.id,
      detail: { email: row.email },
    });
  });
}

type UserPrincipal = Extract<Principal, { kind: 'user' }>;

function requireUser(p: Principal): UserPrincipal {
  requireAuthenticated(p);
  if (p.kind !== 'user') throw new ServiceError('forbidden', 'invitations are answered by the invited user, logged in');
  return p;
}

/** The caller's open invitations (addressed to the email they are logged in with). */
export async function listMyInvitations(db: Db, principal: Principal): Promise<MyInvitation[]> {
  const user = requireUser(principal);
  return db
    .selectFrom('invitations as i')
    .innerJoin('tenants as t', 't.id', 'i.tenantId')
    .leftJoin('users as u', 'u.id', 'i.invitedBy')
    .select(['i.id', 'i.tenantId', 't.slug as tenantSlug', 't.name as tenantName', 'i.role', 'u.email as invitedByEmail', 'i.createdAt', 'i.expiresAt'])
    .where('i.email', '=', user.email.toLowerCase())
    .where('i.status', '=', 'pending')
    .where('i.expiresAt', '>', sql<Date>`now()`)
    .orderBy('i.createdAt', 'desc')
    .execute();
}

/** Which invitation: its id (from the invitee's list) or the token of an invitation link. */
export type InvitationRef = { readonly invitationId: string } | { readonly token: string };

/** Longer than any token `inviteMember` issues: refused before it is hashed. */
const MAX_INVITATION_TOKEN_LENGTH = 200;

/**
 * Accepts or declines an invitation addressed to the caller's email. One addressed to anyone else
 * reads as "not found". Accepting never lowers a role the caller already has.
 */
export async function answerInvitation(db: Db, principal: Principal, ref: InvitationRef, accept: boolean): Promise<InvitationAnswer> {
  const user = requireUser(principal);
  const param = 'invitationId' in ref ? 'invitationId' : 'token';
  if ('invitationId' in ref && !isUuid(ref.invitationId)) throw notFound('invitation');
  if ('token' in ref && ref.token.length > MAX_INVITATION_TOKEN_LENGTH) throw new ServiceError('invalid', 'token is too long', 'token');
  const which = 'invitationId' in ref ? ({ column: 'id', value: ref.invitationId } as const) : ({ column: 'tokenHash', value: hashSecret(ref.token) } as const);
  return withTransaction(db, async (trx) => {
    // The tenant's row first, then the invitation's: the order a removal or demotion takes them in (it withdraws its
    // owner's invitations), so the two wait on each other instead of deadlocking.
    const of = await trx.selectFrom('invitations').select('tenantId').where(which.column, '=', which.value).executeTakeFirst();
    if (of) await trx.selectFrom('tenants').select('id').where('id', '=', of.tenantId).forNoKeyUpdate().execute();
    const inv = await trx
      .selectFrom('invitations')
      .select(['id', 'tenantId', 'email', 'role', 'status', 'expiresAt'])
      .where(which.column, '=', which.value)
      .forUpdate()
      .executeTakeFirst();
    if (!inv || inv.email !== user.email.toLowerCase()) throw new ServiceError('not_found', 'invitation not found', param);
    if (inv.status !== 'pending') throw new ServiceError('conflict', `this invitation was already ${inv.status}`, param);
    if (inv.expiresAt.getTime() <= Date.now()) throw new ServiceError('invalid', 'this invitation has expired; ask for a new one', param);

    await trx
      .updateTable('invitations')
      .set({ status: accept ? 'accepted' : 'declined', respondedAt: sql<Date>`now()` })
      .where('id', '=', inv.id)
      .execute();
    const actor = actorOf(principal);
    await writeAudit(trx, {
      actor,
      tenantId: inv.tenantId,
      action: accept ? 'invitation.accept' : 'invitation.decline',
      targetType: 'invitation',
      targetId: inv.id,
      detail: { email: inv.email, role: inv.role },
    });
    const before = await trx.selectFrom('memberships').select('role').where('tenantId', '=', inv.tenantId).where('userId', '=', user.userId).executeTakeFirst();
    if (!accept) return { invitationId: inv.id, tenantId: inv.tenantId, status: 'declined', role: before?.role ?? null };

    const role: MembershipRole = before?.role === 'owner' ? 'owner' : inv.role;
    if (before?.role !== role) {
      await trx
        .insertInto('memberships')
        .values({ tenantId: inv.tenantId, userId: user.userId, role })
        .onConflict((oc) => oc.columns(['tenantId', 'userId']).doUpdateSet({ role }))
        .execute();
      await writeAudit(trx, {
        actor,
        tenantId: inv.tenantId,
        action: before ? 'membership.role' : 'membership.add',
        targetType: 'user',
        targetId: user.userId,
        detail: { email: inv.email, role, invitationId: inv.id, ...(before ? { from: before.role } : {}) },
      });
    }
    return { invitationId: inv.id, tenantId: inv.tenantId, status: 'accepted', role };
  });
}
