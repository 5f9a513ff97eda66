import { z } from 'zod';
import { authedProcedure, router } from '../../trpc/init.ts';
import { readAuditLog } from './audit.service.ts';

export const auditRouter = router({
  /** With tenantId: that tenant's log (owner). Without: the whole log (platform admin). Newest first. */
  list: authedProcedure
    .input(
      z
        .object({
          tenantId: z.uuid().optional(),
          limit: z.number().int().min(1).max(500).default(50),
          before: z.number().int().positive().optional(),
          action: z.string().max(100).optional(),
        })
        .optional(),
    )
    .query(({ ctx, input }) => readAuditLog(ctx.db, ctx.principal, input ?? {})),
});
