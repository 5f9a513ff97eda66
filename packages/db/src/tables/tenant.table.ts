import type { Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt } from './column-types.ts';

export interface TenantTable {
  id: Generated<string>;
  /** Lowercase, url-safe; the <tenant> segment of dedicated URLs. */
  slug: string;
  name: string;
  rpmLimit: number | null;
  tpmLimit: number | null;
  createdAt: CreatedAt;
}

export type TenantRow = Selectable<TenantTable>;
export type NewTenantRow = Insertable<TenantTable>;
export type TenantUpdate = Updateable<TenantTable>;
