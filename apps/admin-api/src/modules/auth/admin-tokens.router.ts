import { z } from 'zod';
import { authedProcedure, router } from '../../trpc/init.ts';
import { requireAdminTokenScope } from '../access/access.ts';
import { actorOf } from '../access/principal.ts';
import { createAdminToken, listAdminTokens, revokeAdminToken } from './admin-tokens.service.ts';

const futureDate = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

export const adminTokensRouter = router({
  /** With tenantId: that tenant's tokens (owner). Without: every token (platform admin). */
  list: authedProcedure.input(z.object({ tenantId: z.uuid().optional() }).optional()).query(async ({ ctx, input }) => {
    const tenantId = input?.tenantId;
    if (tenantId === undefined) requireAdminTokenScope(ctx.principal, null);
    else requireAdminTokenScope(ctx.principal, tenantId);
    return listAdminTokens(ctx.db, { tenantId });
  }),

  /**
   * `tenantId: null` makes a platform-wide token (platform admins only); a tenant id, a token that
   * acts as owner of that tenant (its owners). The secret is in this response only.
   */
  create: authedProcedure
    .input(z.object({ name: z.string().min(1).max(100), tenantId: z.uuid().nullable(), expiresAt: futureDate.optional() }))
    .mutation(async ({ ctx, input }) => {
      requireAdminTokenScope(ctx.principal, input.tenantId);
      const p = ctx.principal;
      return createAdminToken(ctx.db, {
        name: input.name,
        tenantId: input.tenantId,
        expiresAt: input.expiresAt ?? null,
        userId: p.userId,
        actor: actorOf(p),
      });
    }),

  /** With tenantId: only a token of that tenant (owner); without: any token (platform admin). */
  revoke: authedProcedure.input(z.object({ tokenId: z.uuid(), tenantId: z.uuid().optional() })).mutation(async ({ ctx, input }) => {
    requireAdminTokenScope(ctx.principal, input.tenantId ?? null);
    return revokeAdminToken(ctx.db, { tokenId: input.tokenId, tenantId: input.tenantId, actor: actorOf(ctx.principal) });
  }),
});
