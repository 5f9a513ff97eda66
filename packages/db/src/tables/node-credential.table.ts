import type { Generated, Selectable } from 'kysely';
import type { CreatedAt, NullableTimestamp } from './column-types.ts';

/** A data-plane node's credential for `/internal/v1/*`; the secret (`infn_…`) is stored only as its SHA-256. */
export interface NodeCredentialTable {
  id: Generated<string>;
  name: string;
  prefix: string;
  hash: string;
  createdBy: string | null;
  lastUsedAt: NullableTimestamp;
  revokedAt: NullableTimestamp;
  createdAt: CreatedAt;
}

export type NodeCredentialRow = Selectable<NodeCredentialTable>;
