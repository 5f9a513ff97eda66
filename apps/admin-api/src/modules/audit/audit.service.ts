import type { JsonObject } from '@infer/db';
import type { Db } from '../../db.ts';

/** Who did it: a console user, an admin token, or the system (both null). */
export interface Actor {
  readonly userId?: string | null;
  readonly tokenId?: string | null;
}

export interface AuditEntry {
  readonly actor?: Actor;
  readonly tenantId: string | null;
  readonly action: string;
  readonly targetType: string;
  readonly targetId: string | null;
  /** Never secrets. */
  readonly detail?: JsonObject;
}

/** Appends an audit row; call inside the mutation's transaction. */
export async function writeAudit(db: Db, entry: AuditEntry): Promise<void> {
  await db
    .insertInto('auditLog')
    .values({
      actorUserId: entry.actor?.userId ?? null,
      actorTokenId: entry.actor?.tokenId ?? null,
      tenantId: entry.tenantId,
      action: entry.action,
      targetType: entry.targetType,
      targetId: entry.targetId,
      detail: entry.detail ?? null,
    })
    .execute();
}
