import { catalogRouter } from '../modules/catalog/catalog.router.ts';
import { publicProcedure, router } from './init.ts';

export const appRouter = router({
  catalog: catalogRouter,
  platform: router({
    /** Public base URLs the console shows (the shared base and the data-plane origin). */
    urls: publicProcedure.query(({ ctx }) => ({ ...ctx.publicUrls, beta: true })),
  }),
});

export type AppRouter = typeof appRouter;
