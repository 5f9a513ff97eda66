import { z } from 'zod';
import { publicProcedure, router } from '../../trpc/init.ts';
import { toCatalogView } from './catalog-view.ts';
import { getEntryByName, listEntries, listFacets } from './catalog.service.ts';

const filter = z
  .object({
    provider: z.string().max(200).optional(),
    tag: z.string().max(200).optional(),
    useCase: z.string().max(200).optional(),
    search: z.string().max(200).optional(),
  })
  .optional();

export const catalogRouter = router({
  /** Published endpoints; browsing needs no login. */
  list: publicProcedure.input(filter).query(async ({ ctx, input }) => {
    const entries = await listEntries(ctx.db, { ...input, publishedOnly: true });
    return entries.map(toCatalogView);
  }),
  byName: publicProcedure.input(z.object({ name: z.string().min(1) })).query(async ({ ctx, input }) => {
    const entry = await getEntryByName(ctx.db, input.name);
    return entry?.published ? toCatalogView(entry) : null;
  }),
  facets: publicProcedure.query(({ ctx }) => listFacets(ctx.db)),
});
