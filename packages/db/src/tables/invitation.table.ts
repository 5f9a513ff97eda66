import type { Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt, NullableTimestamp, Timestamp } from './column-types.ts';
import type { MembershipRole } from './membership.table.ts';

export const invitationStatuses = ['pending', 'accepted', 'declined', 'revoked'] as const;
export type InvitationStatus = (typeof invitationStatuses)[number];

export interface InvitationTable {
  id: Generated<string>;
  tenantId: string;
  /** Lower-case; matched against the accepting user's email. */
  email: string;
  role: MembershipRole;
  /** SHA-256 hex of the invitation token; the token itself is never stored. */
  tokenHash: string;
  invitedBy: string | null;
  status: Generated<InvitationStatus>;
  expiresAt: Timestamp;
  respondedAt: NullableTimestamp;
  createdAt: CreatedAt;
}

export type InvitationRow = Selectable<InvitationTable>;
export type NewInvitationRow = Insertable<InvitationTable>;
export type InvitationUpdate = Updateable<InvitationTable>;
