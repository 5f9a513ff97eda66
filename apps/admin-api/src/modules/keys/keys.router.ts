import { z } from 'zod';
import { router, tenantProcedure } from '../../trpc/init.ts';
import { issueApiKey, listTenantApiKeys, revokeTenantApiKey } from './keys.service.ts';

// Any number parses; the service checks the range, so both transports give the same error.
const limit = z.number().nullable().optional();

/**
 * Inference API keys of a tenant. Members list and create keys and revoke the keys they created;
 * owners (and platform admins, tenant admin tokens) revoke any.
 */
export const keysRouter = router({
  list: tenantProcedure.query(({ ctx }) => listTenantApiKeys(ctx.db, ctx.principal, ctx.tenantId)),

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
      issueApiKey(ctx.db, ctx.principal, {
        tenantId: ctx.tenantId,
        name: input.name,
        expiresAt: input.expiresAt ? new Date(input.expiresAt) : null,
        rpmLimit: input.rpmLimit ?? null,
        tpmLimit: input.tpmLimit ?? null,
      }),
    ),

  revoke: tenantProcedure
    .input(z.object({ keyId: z.uuid() }))
    .mutation(({ ctx, input }) => revokeTenantApiKey(ctx.db, ctx.principal, { tenantId: ctx.tenantId, keyId: input.keyId })),
});
