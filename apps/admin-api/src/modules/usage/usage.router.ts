import { z } from 'zod';
import { router, tenantProcedure } from '../../trpc/init.ts';
import { summariseUsage } from './usage.service.ts';
import { AGGREGATE_POINTS } from '../auth/principal-rate-limit.ts';

const instant = z.union([z.iso.datetime({ offset: true }), z.iso.date()]).transform((s) => new Date(s));

export const usageRouter = router({
  /**
   * A tenant's usage in [from, to) by UTC day and by endpoint (members). Defaults: the last 30
   * days up to now; at most 366 days (the service checks the caller and the range, as for GraphQL).
   */
  summary: tenantProcedure
    .meta({ points: AGGREGATE_POINTS })
    .input(z.object({ from: instant.optional(), to: instant.optional() }))
    .query(({ ctx, input }) => summariseUsage(ctx.db, ctx.principal, { tenantId: ctx.tenantId, from: input.from, to: input.to })),
});
