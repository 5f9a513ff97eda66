import { z } from 'zod';
import { authedProcedure, router } from '../../trpc/init.ts';
import { createAdminToken, listAdminTokens, revokeAdminToken } from './admin-tokens.service.ts';

const futureDate = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

// Shapes only: who may list, mint and revoke which tokens is the service's rule.
export const adminTokensRouter = router({
  /** With tenantId: that tenant's tokens (owner). Without: every token (platform admin). */
  list: authedProcedure
    .input(z.object({ tenantId: z.uuid().optional() }).optional())
    .query(({ ctx, input }) => listAdminTokens(ctx.db, ctx.principal, { tenantId: input?.tenantId })),

  /**
   * `tenantId: null` makes a platform-wide token (platform admins only); a tenant id, a token that
   * acts as owner of that tenant (its owners). The secret is in this response only.
   */
  create: authedProcedure
    .input(z.object({ name: z.string().min(1).max(100), tenantId: z.uuid().nullable(), expiresAt: futureDate.optional() }))
    .mutation(({ ctx, input }) => createAdminToken(ctx.db, ctx.principal, { name: input.name, tenantId: input.tenantId, expiresAt: input.expiresAt ?? null })),

  /** With tenantId: only a token of that tenant (owner); without: any token (platform admin). */
  revoke: authedProcedure
    .input(z.object({ tokenId: z.uuid(), tenantId: z.uuid().optional() }))
    .mutation(({ ctx, input }) => revokeAdminToken(ctx.db, ctx.principal, { tokenId: input.tokenId, tenantId: input.tenantId })),
});
