import type { Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt, NullableJson, Serial } from './column-types.ts';

export interface AuditLogTable {
  id: Serial;
  actorUserId: string | null;
  actorTokenId: string | null;
  tenantId: string | null;
  action: string;
  targetType: string;
  targetId: string | null;
  detail: NullableJson;
  createdAt: CreatedAt;
}

export type AuditLogRow = Selectable<AuditLogTable>;
export type NewAuditLogRow = Insertable<AuditLogTable>;
export type AuditLogUpdate = Updateable<AuditLogTable>;
