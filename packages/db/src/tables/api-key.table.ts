import type { Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt, NullableTimestamp } from './column-types.ts';

/** An inference API key of a tenant; only its hash is stored. */
export interface ApiKeyTable {
  id: Generated<string>;
  tenantId: string;
  name: string;
  /** The visible start of the key, shown in lists. */
  prefix: string;
  hash: string;
  createdBy: string | null;
  lastUsedAt: NullableTimestamp;
  expiresAt: NullableTimestamp;
  revokedAt: NullableTimestamp;
  rpmLimit: number | null;
  tpmLimit: number | null;
  createdAt: CreatedAt;
}

export type ApiKeyRow = Selectable<ApiKeyTable>;
export type NewApiKeyRow = Insertable<ApiKeyTable>;
export type ApiKeyUpdate = Updateable<ApiKeyTable>;
