import type { Db } from '../../db.ts';
import { notFound, ServiceError } from '../../errors.ts';
import type { TenantRole } from '../access/principal.ts';
import { requireStoredRole } from '../access/stored-rights.ts';

/** The user a creation acts for, and the role it needs in the tenant (checked again under the tenant's row lock). */
export interface QuotaHolder {
  readonly userId: string | null | undefined;
  readonly role: TenantRole;
}

/**
 * A tenant's quota on something it holds (live API keys, open invitations): inside the caller's transaction, the
 * tenant's row is held while `count` counts, so two creations at once cannot both take the last place; at `max` the
 * creation is a 409 conflict saying `what` and how to free a place.
 *
 * `holder`: the caller's rights were read when the request was authenticated; a removal or demotion (which takes the
 * same row) may have committed since, and its revocations could not see this creation. Under the lock the rights are
 * read again, so what a member creates while being removed is refused, or is there for the removal to revoke.
 */
export async function checkTenantQuota(
  trx: Db,
  tenantId: string,
  quota: { readonly max: number; readonly what: string; readonly free: string; readonly count: () => Promise<number> },
  holder?: QuotaHolder,
): Promise<void> {
  const tenant = await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).forNoKeyUpdate().executeTakeFirst();
  if (!tenant) throw notFound('tenant');
  if (holder) await requireStoredRole(trx, tenantId, holder.userId, holder.role);
  if ((await quota.count()) >= quota.max) throw new ServiceError('conflict', `a tenant holds at most ${quota.max} ${quota.what}: ${quota.free}`);
}
