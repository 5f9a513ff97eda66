import type { Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt } from './column-types.ts';

export const membershipRoles = ['owner', 'member'] as const;
export type MembershipRole = (typeof membershipRoles)[number];

export interface MembershipTable {
  tenantId: string;
  userId: string;
  role: MembershipRole;
  createdAt: CreatedAt;
}

export type MembershipRow = Selectable<MembershipTable>;
export type NewMembershipRow = Insertable<MembershipTable>;
export type MembershipUpdate = Updateable<MembershipTable>;
