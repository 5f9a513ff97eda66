import type { MembershipRole } from '@infer/db';
import type { Db } from '../../db.ts';
import { isUuid } from '../../db.ts';
import { checkName } from '../../check-name.ts';
import { isUniqueViolation, notFound, ServiceError } from '../../errors.ts';
import { requireAuthenticated, requirePlatformAdmin, requireTenantRole, roleIn } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { requireStoredRole } from '../access/stored-rights.ts';
import { checkRateLimits } from '../access/rate-limits.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { revokeAdminTokensBeyondRole } from '../auth/admin-tokens.service.ts';
import { revokeApiKeysOfDeparted } from '../keys/keys.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { createInvitation, revokeInvitationsBeyondRole } from './invitations.service.ts';
import { recordChange } from '../snapshots/snapshots.service.ts';

export interface Tenant {
  id: string;
  slug: string;
  name: string;
  rpmLimit: number | null;
  tpmLimit: number | null;
  createdAt: Date;
}

export interface Membership {
  tenantId: string;
  userId: string;
  role: MembershipRole;
}

const tenantColumns = ['id', 'slug', 'name', 'rpmLimit', 'tpmLimit', 'createdAt'] as const;
const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;
/** A tenant's display name, at most (as an API key's name). */
export const TENANT_NAME_MAX = 100;

export interface CreateTenantInput {
  readonly slug: string;
  readonly name: string;
  readonly rpmLimit?: number | null;
  readonly tpmLimit?: number | null;
  /**
   * Invited as the tenant's first owner (in the same transaction): they join when they accept, and
   * the reply does not say whether the email has an account.
   */
  readonly ownerEmail?: string;
  readonly actor?: Actor;
}

/** Creates a tenant; the slug is the <tenant> segment of its dedicated URLs. */
export async function createTenant(db: Db, input: CreateTenantInput): Promise<Tenant> {
  if (!SLUG.test(input.slug)) {
    throw new ServiceError('invalid', 'slug must be lowercase letters, digits and dashes (max 63)', 'slug');
  }
  const name = checkName(input.name, 'name', { min: 0, max: TENANT_NAME_MAX });
  checkRateLimits(input);
  try {
    return await withTransaction(db, async (trx) => {
      const tenant = await trx
        .insertInto('tenants')
        .values({ slug: input.slug, name: name || input.slug, rpmLimit: input.rpmLimit ?? null, tpmLimit: input.tpmLimit ?? null })
        .returning(tenantColumns)
        .executeTakeFirstOrThrow();
      await recordChange(trx, 'tenant', tenant.id);
      await writeAudit(trx, {
        actor: input.actor,
        tenantId: tenant.id,
        action: 'tenant.create',
        targetType: 'tenant',
        targetId: tenant.id,
        detail: { slug: tenant.slug, name: tenant.name },
      });
      if (input.ownerEmail !== undefined) {
        try {
          await createInvitation(trx, { tenantId: tenant.id, email: input.ownerEmail, role: 'owner', actor: input.actor });
        } catch (err) {
          if (err instanceof ServiceError && err.param === 'email') throw new ServiceError(err.code, err.message, 'ownerEmail');
          throw err;
        }
      }
      return tenant;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ServiceError('conflict', `tenant ${input.slug} already exists`, 'slug');
    throw err;
  }
}

export async function getTenantBySlug(db: Db, slug: string): Promise<Tenant | null> {
  return (await db.selectFrom('tenants').select(tenantColumns).where('slug', '=', slug).executeTakeFirst()) ?? null;
}

export async function getTenantById(db: Db, id: string): Promise<Tenant | null> {
  return (await db.selectFrom('tenants').select(tenantColumns).where('id', '=', id).executeTakeFirst()) ?? null;
}

export async function listTenants(db: Db): Promise<Tenant[]> {
  return db.selectFrom('tenants').select(tenantColumns).orderBy('slug').execute();
}

/** Sets a tenant's rate limits (null: no limit). */
export async function setTenantLimits(db: Db, tenantId: string, limits: { rpmLimit: number | null; tpmLimit: number | null }, actor?: Actor): Promise<Tenant> {
  if (!isUuid(tenantId)) throw notFound('tenant');
  checkRateLimits(limits);
  return withTransaction(db, async (trx) => {
    const tenant = await trx
      .updateTable('tenants')
      .set({ rpmLimit: limits.rpmLimit, tpmLimit: limits.tpmLimit })
      .where('id', '=', tenantId)
      .returning(tenantColumns)
      .executeTakeFirst();
    if (!tenant) throw notFound('tenant');
    await recordChange(trx, 'tenant', tenantId);
    await writeAudit(trx, {
      actor,
      tenantId,
      action: 'tenant.set_limits',
      targetType: 'tenant',
      targetId: tenantId,
      detail: { rpmLimit: limits.rpmLimit, tpmLimit: limits.tpmLimit },
    });
    return tenant;
  });
}

/** Adds a user to a tenant, or changes their role if already a member. */
export async function addMember(db: Db, input: Membership): Promise<Membership> {
  return db
    .insertInto('memberships')
    .values(input)
    .onConflict((oc) => oc.columns(['tenantId', 'userId']).doUpdateSet({ role: input.role }))
    .returning(['tenantId', 'userId', 'role'])
    .executeTakeFirstOrThrow();
}

/** The tenants a user belongs to, with their role. */
export async function listTenantsOfUser(db: Db, userId: string): Promise<(Tenant & { role: MembershipRole })[]> {
  return db
    .selectFrom('memberships as m')
    .innerJoin('tenants as t', 't.id', 'm.tenantId')
    .select(['t.id', 't.slug', 't.name', 't.rpmLimit', 't.tpmLimit', 't.createdAt', 'm.role'])
    .where('m.userId', '=', userId)
    .orderBy('t.slug')
    .execute();
}

/**
 * The tenants the caller belongs to by name, with the role: a user's memberships, a tenant admin
 * token's one tenant (as owner). A platform token belongs to none (platform admins list every
 * tenant with `listTenants`). The one answer for `tenants.mine`, `auth.me`, `viewer.tenants` and
 * the catalog's "your deployment" views.
 */
export async function listCallerTenants(db: Db, p: Principal): Promise<(Tenant & { role: MembershipRole })[]> {
  if (p.kind === 'user') return listTenantsOfUser(db, p.userId);
  if (p.kind !== 'admin_token' || p.tenantId === null) return [];
  const tenant = await getTenantById(db, p.tenantId);
  return tenant ? [{ ...tenant, role: 'owner' }] : [];
}

export async function getMembership(db: Db, tenantId: string, userId: string): Promise<Membership | null> {
  return (
    (await db
      .selectFrom('memberships')
      .select(['tenantId', 'userId', 'role'])
      .where('tenantId', '=', tenantId)
      .where('userId', '=', userId)
      .executeTakeFirst()) ?? null
  );
}

/** A member as listed (email for display; never the password hash). */
export interface Member {
  userId: string;
  email: string;
  displayName: string | null;
  role: MembershipRole;
  createdAt: Date;
}

export async function listMembers(db: Db, tenantId: string): Promise<Member[]> {
  if (!isUuid(tenantId)) return [];
  return db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.userId')
    .select(['m.userId', 'u.email', 'u.displayName', 'm.role', 'm.createdAt'])
    .where('m.tenantId', '=', tenantId)
    .orderBy('u.email')
    .execute();
}

async function countOwners(db: Db, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('tenantId', '=', tenantId)
    .where('role', '=', 'owner')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Removes a user from a tenant (not the last owner). The tenant admin tokens and the inference keys that user
 * created are revoked with it (unless they are a platform admin), so access ends with the membership. The acting
 * user (`actor`) must still be an owner once the tenant's row is held: one being removed meanwhile cannot remove
 * another owner.
 */
export async function removeMember(db: Db, input: { tenantId: string; userId: string; actor?: Actor }): Promise<void> {
  if (!isUuid(input.tenantId) || !isUuid(input.userId)) throw notFound('member');
  await withTransaction(db, async (trx) => {
    await trx.selectFrom('tenants').select('id').where('id', '=', input.tenantId).forUpdate().executeTakeFirst();
    await requireStoredRole(trx, input.tenantId, input.actor?.userId, 'owner');
    const before = await getMembership(trx, input.tenantId, input.userId);
    if (!before) throw notFound('member');
    if (before.role === 'owner' && (await countOwners(trx, input.tenantId)) <= 1) {
      throw new ServiceError('conflict', 'a tenant keeps at least one owner', 'userId');
    }
    await trx.deleteFrom('memberships').where('tenantId', '=', input.tenantId).where('userId', '=', input.userId).execute();
    const tokens = await revokeAdminTokensBeyondRole(trx, { tenantId: input.tenantId, userId: input.userId });
    const keys = await revokeApiKeysOfDeparted(trx, { tenantId: input.tenantId, userId: input.userId });
    const invitations = await revokeInvitationsBeyondRole(trx, { tenantId: input.tenantId, userId: input.userId });
    await writeAudit(trx, {
      actor: input.actor,
      tenantId: input.tenantId,
      action: 'membership.remove',
      targetType: 'user',
      targetId: input.userId,
      detail: {
        role: before.role,
        revokedAdminTokens: tokens.length,
        revokedApiKeys: keys.length,
        ...(invitations.length > 0 ? { withdrawnInvitations: invitations.length } : {}),
      },
    });
  });
}

/**
 * Changes an existing member's role (owners). Only members are reachable by user id, so this tells
 * the owner nothing they cannot already list; new people join through invitations.
 */
export async function setMemberRole(
  db: Db,
  principal: Principal,
  input: { readonly tenantId: string; readonly userId: string; readonly role: MembershipRole },
): Promise<Member> {
  requireTenantRole(principal, input.tenantId, 'owner');
  if (!isUuid(input.userId)) throw notFound('member');
  if (input.role !== 'owner' && input.role !== 'member') throw new ServiceError('invalid', 'role must be owner or member', 'role');
  return withTransaction(db, async (trx) => {
    await trx.selectFrom('tenants').select('id').where('id', '=', input.tenantId).forUpdate().executeTakeFirst();
    // Still an owner now that the row is held: one removed or demoted meanwhile cannot promote an accomplice.
    await requireStoredRole(trx, input.tenantId, actorOf(principal).userId, 'owner');
    const before = await getMembership(trx, input.tenantId, input.userId);
    if (!before) throw notFound('member');
    if (before.role === 'owner' && input.role !== 'owner' && (await countOwners(trx, input.tenantId)) <= 1) {
      throw new ServiceError('conflict', 'a tenant keeps at least one owner', 'role');
    }
    if (before.role !== input.role) {
      await trx.updateTable('memberships').set({ role: input.role }).where('tenantId', '=', input.tenantId).where('userId', '=', input.userId).execute();
      // A demoted owner's tenant admin tokens would still act as owner, and their open invitations still invite: they
      // go with the role.
      const revoked = await revokeAdminTokensBeyondRole(trx, { tenantId: input.tenantId, userId: input.userId });
      const invitations = await revokeInvitationsBeyondRole(trx, { tenantId: input.tenantId, userId: input.userId });
      await writeAudit(trx, {
        actor: actorOf(principal),
        tenantId: input.tenantId,
        action: 'membership.role',
        targetType: 'user',
        targetId: input.userId,
        detail: {
          role: input.role,
          from: before.role,
          ...(revoked.length > 0 ? { revokedAdminTokens: revoked.length } : {}),
          ...(invitations.length > 0 ? { withdrawnInvitations: invitations.length } : {}),
        },
      });
    }
    const member = (await listMembers(trx, input.tenantId)).find((m) => m.userId === input.userId);
    if (!member) throw notFound('member');
    return member;
  });
}

/** Removes a member (owners); see `removeMember`. */
export async function removeTenantMember(db: Db, principal: Principal, input: { readonly tenantId: string; readonly userId: string }): Promise<void> {
  requireTenantRole(principal, input.tenantId, 'owner');
  await removeMember(db, { ...input, actor: actorOf(principal) });
}

// Platform-admin operations and tenant reads as the transports call them: the caller is checked here.

/** Creates a tenant (platform admins); `ownerEmail` is invited as its first owner. */
export async function adminCreateTenant(db: Db, principal: Principal, input: Omit<CreateTenantInput, 'actor'>): Promise<Tenant> {
  requirePlatformAdmin(principal);
  return createTenant(db, { ...input, actor: actorOf(principal) });
}

/** Sets a tenant's rate limits (platform admins). */
export async function adminSetTenantLimits(
  db: Db,
  principal: Principal,
  tenantId: string,
  limits: { rpmLimit: number | null; tpmLimit: number | null },
): Promise<Tenant> {
  requirePlatformAdmin(principal);
  return setTenantLimits(db, tenantId, limits, actorOf(principal));
}

/** Every tenant (platform admins). */
export async function adminListTenants(db: Db, principal: Principal): Promise<Tenant[]> {
  requirePlatformAdmin(principal);
  return listTenants(db);
}

/** One tenant of the caller by id or slug; a tenant the caller cannot see is "not found". */
export async function getCallerTenant(db: Db, principal: Principal, by: { readonly id?: string | null; readonly slug?: string | null }): Promise<Tenant> {
  requireAuthenticated(principal);
  // Naming no tenant is the caller's mistake, not a tenant that does not exist.
  if (by.id == null && by.slug == null) throw new ServiceError('invalid', 'name the tenant by id or slug', 'id');
  // Both: they must name one tenant, or the answer would silently be for the id alone.
  if (by.id != null && by.slug != null) throw new ServiceError('invalid', 'name the tenant by id or by slug, not both', 'slug');
  const tenant = by.id != null ? (isUuid(by.id) ? await getTenantById(db, by.id) : null) : await getTenantBySlug(db, by.slug!);
  if (!tenant) throw notFound('tenant');
  requireTenantRole(principal, tenant.id);
  return tenant;
}

/** The caller's role in a tenant they belong to (platform admins and the tenant's admin tokens act as owners); another tenant is "not found". */
export function callerRoleIn(principal: Principal, tenantId: string): MembershipRole {
  requireTenantRole(principal, tenantId, 'member');
  return roleIn(principal, tenantId) ?? 'member';
}

/** The members of a tenant, for its members. */
export async function listTenantMembers(db: Db, principal: Principal, tenantId: string): Promise<Member[]> {
  requireTenantRole(principal, tenantId, 'member');
  return listMembers(db, tenantId);
}
