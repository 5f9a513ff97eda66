import { z } from 'zod';
import { router, tenantProcedure } from '../../trpc/init.ts';
import { keyRevokeLimit } from '../access/access.ts';
import { actorOf } from '../access/principal.ts';
import { createApiKey, listApiKeys, revokeApiKey } from './keys.service.ts';

const limit = z.number().int().positive().max(1_000_000_000).nullable().optional();

/**
 * Inference API keys of a tenant. Members list and create keys and revoke the keys they created;
 * owners (and platform admins, tenant admin tokens) revoke any.
 */
export const keysRouter = router({
  list: tenantProcedure.query(({ ctx }) => listApiKeys(ctx.db, ctx.tenantId)),

  /** The secret is in this response only; lists show the prefix. */
  create: tenantProcedure
    .input(
      z.object({
        name: z.string().min(1).max(100),
        expiresAt: z.iso.datetime({ offset: true }).optional(),
        rpmLimit: limit,
        tpmLimit: limit,
      }),
    )
    .mutation(({ ctx, input }) =>
      createApiKey(ctx.db, {
        tenantId: ctx.tenantId,
        name: input.name,
        expiresAt: input.expiresAt ? new Date(input.expiresAt) : null,
        rpmLimit: input.rpmLimit ?? null,
        tpmLimit: input.tpmLimit ?? null,
        createdBy: ctx.principal.userId,
        actor: actorOf(ctx.principal),
      }),
    ),

  revoke: tenantProcedure.input(z.object({ keyId: z.uuid() })).mutation(({ ctx, input }) =>
    revokeApiKey(ctx.db, {
      tenantId: ctx.tenantId,
      keyId: input.keyId,
      onlyCreatedBy: keyRevokeLimit(ctx.principal, ctx.tenantId),
      actor: actorOf(ctx.principal),
    }),
  ),
});
