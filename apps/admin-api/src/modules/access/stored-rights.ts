import type { Db } from '../../db.ts';
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
