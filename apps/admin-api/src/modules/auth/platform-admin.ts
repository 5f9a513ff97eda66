import type { Db } from '../../db.ts';
import { writeAudit } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { createUser, type User } from './auth.service.ts';

export interface CreatePlatformAdminInput {
  readonly email: string;
  readonly password: string;
  readonly displayName?: string | null;
}

/**
 * Creates a platform admin from the operator's shell (`pnpm --filter @infer/admin-api admin:create`):
 * the bootstrap of a fresh database, where no console user exists to authorise it. Whoever can run it
 * already holds the database credentials, so there is no principal; the audit row names the system.
 */
export async function createPlatformAdmin(db: Db, input: CreatePlatformAdminInput): Promise<User> {
  return withTransaction(db, async (trx) => {
    const user = await createUser(trx, { email: input.email, password: input.password, displayName: input.displayName ?? null, isPlatformAdmin: true });
    await writeAudit(trx, {
      tenantId: null,
      action: 'platform_admin.create',
      targetType: 'user',
      targetId: user.id,
      detail: { email: user.email, via: 'cli' },
    });
    return user;
  });
}
