import type { JsonObject, JsonValue } from '@infer/db';
import { isUuid, type Db } from '../../db.ts';
import { requirePlatformAdmin, requireTenantRole } from '../access/access.ts';
import type { Principal } from '../access/principal.ts';

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

/** An audit row as listed, with the acting user's email when there was one. */
export interface AuditRecord {
  id: number;
  createdAt: Date;
  tenantId: string | null;
  action: string;
  targetType: string;
  targetId: string | null;
  actorUserId: string | null;
  actorEmail: string | null;
  actorTokenId: string | null;
  detail: JsonValue | null;
}

/**
 * Audit rows, newest first. `tenantId` string: that tenant's rows only; undefined: every row
 * (platform admins). `before` pages by id.
 */
export async function listAudit(db: Db, input: { tenantId?: string; limit?: number; before?: number; action?: string }): Promise<AuditRecord[]> {
  if (input.tenantId !== undefined && !isUuid(input.tenantId)) return [];
  let q = db
    .selectFrom('auditLog as a')
    .leftJoin('users as u', 'u.id', 'a.actorUserId')
    .select([
      'a.id',
      'a.createdAt',
      'a.tenantId',
      'a.action',
      'a.targetType',
      'a.targetId',
      'a.actorUserId',
      'u.email as actorEmail',
      'a.actorTokenId',
      'a.detail',
    ])
    .orderBy('a.id', 'desc')
    .limit(Math.min(Math.max(input.limit ?? 50, 1), 500));
  if (input.tenantId !== undefined) q = q.where('a.tenantId', '=', input.tenantId);
  if (input.before !== undefined) q = q.where('a.id', '<', input.before);
  if (input.action !== undefined) q = q.where('a.action', '=', input.action);
  const rows = await q.execute();
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

/** The audit log as a caller may read it: one tenant's rows (its owners), or every row (platform admins). */
export function readAuditLog(
  db: Db,
  principal: Principal,
  input: { tenantId?: string; limit?: number; before?: number; action?: string } = {},
): Promise<AuditRecord[]> {
  if (input.tenantId === undefined) requirePlatformAdmin(principal);
  else requireTenantRole(principal, input.tenantId, 'owner');
  return listAudit(db, input);
}
