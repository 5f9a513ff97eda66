import type { Db } from '../../db.ts';
import { notFound, ServiceError } from '../../errors.ts';

/**
 * A tenant's quota on something it holds (live API keys, open invitations): inside the caller's transaction, the
 * tenant's row is held while `count` counts, so two creations at once cannot both take the last place; at `max` the
 * creation is a 409 conflict saying `what` and how to free a place.
 */
export async function checkTenantQuota(
  trx: Db,
  tenantId: string,
  quota: { readonly max: number; readonly what: string; readonly free: string; readonly count: () => Promise<number> },
): Promise<void> {
  const tenant = await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).forNoKeyUpdate().executeTakeFirst();
  if (!tenant) throw notFound('tenant');
  if ((await quota.count()) >= quota.max) throw new ServiceError('conflict', `a tenant holds at most ${quota.max} ${quota.what}: ${quota.free}`);
}
