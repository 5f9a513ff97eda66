import type { Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt, NullableTimestamp } from './column-types.ts';

/** A token for infra automation (GraphQL, tRPC); separate from inference keys. */
export interface AdminTokenTable {
  id: Generated<string>;
  name: string;
  prefix: string | null;
  hash: string;
  userId: string | null;
  /** Null means platform-wide. */
  tenantId: string | null;
  /** The admin token that minted this one, if any: revoking it revokes this. */
  parentTokenId: Generated<string | null>;
  lastUsedAt: NullableTimestamp;
  expiresAt: NullableTimestamp;
  revokedAt: NullableTimestamp;
  createdAt: CreatedAt;
}

export type AdminTokenRow = Selectable<AdminTokenTable>;
export type NewAdminTokenRow = Insertable<AdminTokenTable>;
export type AdminTokenUpdate = Updateable<AdminTokenTable>;
