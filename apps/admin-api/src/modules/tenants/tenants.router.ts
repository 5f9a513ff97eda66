import { z } from 'zod';
import { notFound, ServiceError } from '../../errors.ts';
import { adminProcedure, authedProcedure, requireOwner, router, tenantProcedure } from '../../trpc/init.ts';
import { isPlatformAdmin } from '../access/access.ts';
import { actorOf } from '../access/principal.ts';
import {
  addMemberByEmail, createTenant, getTenantById, listMembers, listTenants, listTenantsOfUser, removeMember,
  setTenantLimits,
} from './tenants.service.ts';

const limit = z.number().int().positive().max(1_000_000_000).nullable();
const role = z.enum(['owner', 'member']);

export const tenantsRouter = router({
  /** Tenants the caller belongs to, with the role (a tenant admin token: its tenant, as owner). */
  mine: authedProcedure.query(async ({ ctx }) => {
    const p = ctx.principal;
    if (p.kind === 'user') return listTenantsOfUser(ctx.db, p.userId);
    if (p.tenantId === null) return [];
    const tenant = await getTenantById(ctx.db, p.tenantId);
    return tenant ? [{ ...tenant, role: 'owner' as const }] : [];
  }),

  /** Every tenant (platform admin). */
  all: adminProcedure.query(({ ctx }) => listTenants(ctx.db)),

  /** Creates a tenant (platform admin); `ownerEmail` makes that existing user its first owner. */
  create: adminProcedure
    .input(
      z.object({
        slug: z.string().min(1).max(63),
        name: z.string().max(200).default(''),
        rpmLimit: limit.optional(),
        tpmLimit: limit.optional(),
        ownerEmail: z.string().max(320).optional(),
      }),
    )
    .mutation(({ ctx, input }) => createTenant(ctx.db, { ...input, actor: actorOf(ctx.principal) })),

  /** One tenant and the caller's role in it (members). */
  get: tenantProcedure.query(async ({ ctx }) => {
    const tenant = await getTenantById(ctx.db, ctx.tenantId);
    if (!tenant) throw notFound('tenant');
    return { ...tenant, role: ctx.role, viewerIsPlatformAdmin: isPlatformAdmin(ctx.principal) };
  }),

  members: router({
    list: tenantProcedure.query(({ ctx }) => listMembers(ctx.db, ctx.tenantId)),
    /** Adds an existing user by email, or changes their role (owner). */
    add: tenantProcedure
      .input(z.object({ email: z.string().min(3).max(320), role: role.default('member') }))
      .mutation(({ ctx, input }) => {
        requireOwner(ctx);
        return addMemberByEmail(ctx.db, { tenantId: ctx.tenantId, email: input.email, role: input.role, actor: actorOf(ctx.principal) });
      }),
    /** Removes a member (owner); the last owner stays. */
    remove: tenantProcedure.input(z.object({ userId: z.uuid() })).mutation(async ({ ctx, input }) => {
      requireOwner(ctx);
      await removeMember(ctx.db, { tenantId: ctx.tenantId, userId: input.userId, actor: actorOf(ctx.principal) });
      return { ok: true as const };
    }),
  }),

  /** Tenant-wide rate limits (platform admin); null: no limit. */
  setLimits: adminProcedure
    .input(z.object({ tenantId: z.uuid(), rpmLimit: limit, tpmLimit: limit }))
    .mutation(({ ctx, input }) =>
      setTenantLimits(ctx.db, input.tenantId, { rpmLimit: input.rpmLimit, tpmLimit: input.tpmLimit }, actorOf(ctx.principal)),
    ),
});
