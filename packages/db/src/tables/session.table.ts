import type { Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt, Timestamp } from './column-types.ts';

export interface SessionTable {
  /** SHA-256 hex of the session token; the token itself is never stored. */
  id: string;
  userId: string;
  expiresAt: Timestamp;
  createdAt: CreatedAt;
}

export type SessionRow = Selectable<SessionTable>;
export type NewSessionRow = Insertable<SessionTable>;
export type SessionUpdate = Updateable<SessionTable>;
