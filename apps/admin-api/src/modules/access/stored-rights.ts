import type { Db } from '../../db.ts';
import { checkRole } from './access.ts';
import type { TenantRole } from './principal.ts';

/** What a user holds in a tenant now, as stored: whether they are a platform admin, and their role there (null: none). */
export interface StoredRights {
  readonly isPlatformAdmin: boolean;
  readonly role: TenantRole | null;
}

/**
 * A user's rights in a tenant read from the database (not from a principal resolved earlier): the membership change
 * paths use it, inside their transaction, to end what the user's credentials carried beyond them. Undefined: no
 * such user.
 */
export async function storedRights(trx: Db, input: { readonly tenantId: string; readonly userId: string }): Promise<StoredRights | undefined> {
  const row = await trx
    .selectFrom('users as u')
    .leftJoin('memberships as m', (j) => j.onRef('m.userId', '=', 'u.id').on('m.tenantId', '=', input.tenantId))
    .select(['u.isPlatformAdmin', 'm.role'])
    .where('u.id', '=', input.userId)
    .executeTakeFirst();
  return row === undefined ? undefined : { isPlatformAdmin: row.isPlatformAdmin, role: row.role ?? null };
}

/** The role stored rights act with in the tenant (a platform admin: owner), or null. */
export const storedRole = (rights: StoredRights | undefined): TenantRole | null => (rights?.isPlatformAdmin ? 'owner' : (rights?.role ?? null));

/** Whether stored rights still carry `min` in the tenant. */
export const storedRightsReach = (rights: StoredRights | undefined, min: TenantRole): boolean => {
  const role = storedRole(rights);
  return role !== null && (min === 'member' || role === 'owner');
};

/**
 * The acting user's role read again inside the caller's transaction, which holds the tenant's row: a removal or
 * demotion (which takes that row first) committed since the request was authenticated counts here, refused as
 * `requireTenantRole` refuses. No user (an admin token minted by no one): the principal's own rights stand.
 */
export async function requireStoredRole(trx: Db, tenantId: string, userId: string | null | undefined, min: TenantRole): Promise<void> {
  if (!userId) return;
  checkRole(storedRole(await storedRights(trx, { tenantId, userId })), min);
}
