import { z } from 'zod';
import { adminProcedure, authedProcedure, router, tenantProcedure } from '../../trpc/init.ts';
import { isPlatformAdmin } from '../access/access.ts';
import { answerInvitation, inviteMember, listMyInvitations, listTenantInvitations, revokeInvitation } from './invitations.service.ts';
import {
  adminCreateTenant,
  adminListTenants,
  adminSetTenantLimits,
  callerRoleIn,
  getCallerTenant,
  listCallerTenants,
  listTenantMembers,
  removeTenantMember,
  setMemberRole,
} from './tenants.service.ts';

const limit = z.number().int().positive().max(1_000_000_000).nullable();
const role = z.enum(['owner', 'member']);
const invitationRef = z.union([z.object({ invitationId: z.uuid() }), z.object({ token: z.string().min(1).max(200) })]);

export const tenantsRouter = router({
  /** Tenants the caller belongs to, with the role (a tenant admin token: its tenant, as owner). */
  mine: authedProcedure.query(({ ctx }) => listCallerTenants(ctx.db, ctx.principal)),

  /** Every tenant (platform admin). */
  all: adminProcedure.query(({ ctx }) => adminListTenants(ctx.db, ctx.principal)),

  /** Creates a tenant (platform admin); `ownerEmail` is invited as its first owner. */
  create: adminProcedure
    .input(
      z.object({
        slug: z.string().min(1).max(63),
        name: z.string().default(''), // bounded by the service (TENANT_NAME_MAX)
        rpmLimit: limit.optional(),
        tpmLimit: limit.optional(),
        ownerEmail: z.string().max(320).optional(),
      }),
    )
    .mutation(({ ctx, input }) => adminCreateTenant(ctx.db, ctx.principal, input)),

  /** One tenant and the caller's role in it (members). */
  get: tenantProcedure.query(async ({ ctx }) => {
    const tenant = await getCallerTenant(ctx.db, ctx.principal, { id: ctx.tenantId });
    return { ...tenant, role: callerRoleIn(ctx.principal, tenant.id), viewerIsPlatformAdmin: isPlatformAdmin(ctx.principal) };
  }),

  members: router({
    list: tenantProcedure.query(({ ctx }) => listTenantMembers(ctx.db, ctx.principal, ctx.tenantId)),
    /**
     * Invites an email (owner); the same reply whether or not it has an account. They become a
     * member when they accept (`tenants.invitations.accept`).
     */
    add: tenantProcedure
      .input(z.object({ email: z.string().max(320), role: role.default('member') }))
      .mutation(({ ctx, input }) => inviteMember(ctx.db, ctx.principal, { tenantId: ctx.tenantId, email: input.email, role: input.role })),
    /** Changes an existing member's role (owner); the last owner stays. */
    setRole: tenantProcedure
      .input(z.object({ userId: z.uuid(), role }))
      .mutation(({ ctx, input }) => setMemberRole(ctx.db, ctx.principal, { tenantId: ctx.tenantId, userId: input.userId, role: input.role })),
    /** Removes a member (owner); the last owner stays. */
    remove: tenantProcedure.input(z.object({ userId: z.uuid() })).mutation(async ({ ctx, input }) => {
      await removeTenantMember(ctx.db, ctx.principal, { tenantId: ctx.tenantId, userId: input.userId });
      return { ok: true as const };
    }),
  }),

  invitations: router({
    /** Invites an email (owner): same as `members.add`. */
    create: tenantProcedure
      .input(z.object({ email: z.string().max(320), role: role.default('member') }))
      .mutation(({ ctx, input }) => inviteMember(ctx.db, ctx.principal, { tenantId: ctx.tenantId, email: input.email, role: input.role })),
    /** The tenant's open invitations (owner). */
    list: tenantProcedure.query(({ ctx }) => listTenantInvitations(ctx.db, ctx.principal, ctx.tenantId)),
    /** Withdraws an open invitation (owner). */
    revoke: tenantProcedure.input(z.object({ invitationId: z.uuid() })).mutation(async ({ ctx, input }) => {
      await revokeInvitation(ctx.db, ctx.principal, { tenantId: ctx.tenantId, invitationId: input.invitationId });
      return { ok: true as const };
    }),
    /** Invitations addressed to the logged-in user's email. */
    mine: authedProcedure.query(({ ctx }) => listMyInvitations(ctx.db, ctx.principal)),
    accept: authedProcedure.input(invitationRef).mutation(({ ctx, input }) => answerInvitation(ctx.db, ctx.principal, input, true)),
    decline: authedProcedure.input(invitationRef).mutation(({ ctx, input }) => answerInvitation(ctx.db, ctx.principal, input, false)),
  }),

  /** Tenant-wide rate limits (platform admin); null: no limit. */
  setLimits: adminProcedure
    .input(z.object({ tenantId: z.uuid(), rpmLimit: limit, tpmLimit: limit }))
    .mutation(({ ctx, input }) => adminSetTenantLimits(ctx.db, ctx.principal, input.tenantId, { rpmLimit: input.rpmLimit, tpmLimit: input.tpmLimit })),
});
