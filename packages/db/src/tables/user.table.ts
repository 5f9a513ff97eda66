import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt } from './column-types.ts';

export interface UserTable {
  id: Generated<string>;
  /** Stored lowercased. */
  email: string;
  passwordHash: string;
  displayName: string | null;
  isPlatformAdmin: ColumnType<boolean, boolean | undefined, boolean>;
  createdAt: CreatedAt;
}

export type UserRow = Selectable<UserTable>;
export type NewUserRow = Insertable<UserTable>;
export type UserUpdate = Updateable<UserTable>;
