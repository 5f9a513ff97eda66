import { z } from 'zod';
import { ServiceError } from '../../errors.ts';
import { router, tenantProcedure } from '../../trpc/init.ts';
import { summariseUsage } from './usage.service.ts';

const DAY_MS = 86_400_000;
const MAX_RANGE_DAYS = 366;
const instant = z.union([z.iso.datetime({ offset: true }), z.iso.date()]).transform((s) => new Date(s));

export const usageRouter = router({
  /**
   * A tenant's usage in [from, to) by UTC day and by endpoint (members). Defaults: the last 30
   * days up to now; at most 366 days.
   */
  summary: tenantProcedure
    .input(z.object({ from: instant.optional(), to: instant.optional() }))
    .query(({ ctx, input }) => {
      const to = input.to ?? new Date();
      const from = input.from ?? new Date(to.getTime() - 30 * DAY_MS);
      if (from.getTime() >= to.getTime()) throw new ServiceError('invalid', 'from must be before to', 'from');
      if (to.getTime() - from.getTime() > MAX_RANGE_DAYS * DAY_MS) {
        throw new ServiceError('invalid', `the range is at most ${MAX_RANGE_DAYS} days`, 'from');
      }
      return summariseUsage(ctx.db, { tenantId: ctx.tenantId, from, to });
    }),
});
