import { builder } from '../../graphql/builder.ts';
import { ServiceError } from '../../errors.ts';
import {
  answerInvitation,
  inviteMember,
  listMyInvitations,
  listTenantInvitations,
  revokeInvitation,
  type InvitationAnswer,
  type InvitationRef,
  type InvitationSent,
  type MyInvitation,
  type TenantInvitation,
} from './invitations.service.ts';
import { TenantRef, TenantRoleEnum, ViewerRef } from './tenants.graphql.ts';

const InvitationSentRef = builder.objectRef<InvitationSent>('InvitationSent').implement({
  description: 'The reply to an invitation: the same whether or not the email has an account. They join when they accept.',
  fields: (t) => ({
    invitationId: t.exposeID('invitationId'),
    email: t.exposeString('email'),
    role: t.field({ type: TenantRoleEnum, resolve: (i) => i.role }),
    expiresAt: t.field({ type: 'DateTime', resolve: (i) => i.expiresAt }),
    token: t.exposeString('token', { description: 'For an invitation link: shown this once, stored only as a hash. Only the invited user can use it.' }),
  }),
});

const TenantInvitationRef = builder.objectRef<TenantInvitation>('TenantInvitation').implement({
  description: 'An open invitation to a tenant, as its owners see it.',
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    role: t.field({ type: TenantRoleEnum, resolve: (i) => i.role }),
    invitedByEmail: t.exposeString('invitedByEmail', { nullable: true }),
    createdAt: t.field({ type: 'DateTime', resolve: (i) => i.createdAt }),
    expiresAt: t.field({ type: 'DateTime', resolve: (i) => i.expiresAt }),
  }),
});

const MyInvitationRef = builder.objectRef<MyInvitation>('Invitation').implement({
  description: 'An open invitation addressed to the logged-in user.',
  fields: (t) => ({
    id: t.exposeID('id'),
    tenantId: t.exposeID('tenantId'),
    tenantSlug: t.exposeString('tenantSlug'),
    tenantName: t.exposeString('tenantName'),
    role: t.field({ type: TenantRoleEnum, resolve: (i) => i.role }),
    invitedByEmail: t.exposeString('invitedByEmail', { nullable: true }),
    createdAt: t.field({ type: 'DateTime', resolve: (i) => i.createdAt }),
    expiresAt: t.field({ type: 'DateTime', resolve: (i) => i.expiresAt }),
  }),
});

const InvitationStatusEnum = builder.enumType('InvitationAnswerStatus', {
  values: { ACCEPTED: { value: 'accepted' }, DECLINED: { value: 'declined' } } as const,
});

const InvitationAnswerRef = builder.objectRef<InvitationAnswer>('InvitationAnswer').implement({
  fields: (t) => ({
    invitationId: t.exposeID('invitationId'),
    tenantId: t.exposeID('tenantId'),
    status: t.field({ type: InvitationStatusEnum, resolve: (a) => a.status }),
    role: t.field({
      type: TenantRoleEnum,
      nullable: true,
      description: "The caller's role in the tenant now; null when not a member.",
      resolve: (a) => a.role,
    }),
  }),
});

builder.objectField(TenantRef, 'invitations', (t) =>
  t.field({
    type: [TenantInvitationRef],
    description: 'Owners: open invitations to this tenant, newest first.',
    resolve: (tenant, _args, ctx) => listTenantInvitations(ctx.db, ctx.principal, tenant.id),
  }),
);

builder.objectField(ViewerRef, 'invitations', (t) =>
  t.field({
    type: [MyInvitationRef],
    description: "Open invitations addressed to the logged-in user's email (none for admin tokens).",
    resolve: (v, _args, ctx) => (v.principal.kind === 'user' ? listMyInvitations(ctx.db, v.principal) : []),
  }),
);

function invitationRef(args: { id?: string | number | null; token?: string | null }): InvitationRef {
  if (args.id != null && args.token == null) return { invitationId: String(args.id) };
  if (args.token != null && args.id == null) return { token: args.token };
  throw new ServiceError('invalid', 'give either id or token', 'id');
}

builder.mutationFields((t) => ({
  inviteMember: t.field({
    type: InvitationSentRef,
    description: 'Owners: invites an email to the tenant. The reply is the same whether or not the email has an account.',
    args: {
      tenantId: t.arg.id({ required: true }),
      email: t.arg.string({ required: true }),
      role: t.arg({ type: TenantRoleEnum, description: 'Default MEMBER.' }),
    },
    resolve: (_root, args, ctx) => inviteMember(ctx.db, ctx.principal, { tenantId: String(args.tenantId), email: args.email, role: args.role ?? 'member' }),
  }),
  revokeInvitation: t.field({
    type: 'Boolean',
    description: 'Owners: withdraws an open invitation.',
    args: { tenantId: t.arg.id({ required: true }), id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      await revokeInvitation(ctx.db, ctx.principal, { tenantId: String(args.tenantId), invitationId: String(args.id) });
      return true;
    },
  }),
  acceptInvitation: t.field({
    type: InvitationAnswerRef,
    description: 'The invited user (logged in with the invited email) joins the tenant. Give the id or the token of an invitation link.',
    args: { id: t.arg.id(), token: t.arg.string() },
    resolve: (_root, args, ctx) => answerInvitation(ctx.db, ctx.principal, invitationRef(args), true),
  }),
  declineInvitation: t.field({
    type: InvitationAnswerRef,
    description: 'The invited user declines; the invitation closes.',
    args: { id: t.arg.id(), token: t.arg.string() },
    resolve: (_root, args, ctx) => answerInvitation(ctx.db, ctx.principal, invitationRef(args), false),
  }),
}));
