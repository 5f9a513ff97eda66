import { adminTokensRouter } from '../modules/auth/admin-tokens.router.ts';
import { authRouter } from '../modules/auth/auth.router.ts';
import { auditRouter } from '../modules/audit/audit.router.ts';
import { catalogRouter } from '../modules/catalog/catalog.router.ts';
import { deploymentsRouter } from '../modules/deployments/deployments.router.ts';
import { keysRouter } from '../modules/keys/keys.router.ts';
import { nodeCredentialsRouter } from '../modules/nodes/node-credentials.router.ts';
import { tenantsRouter } from '../modules/tenants/tenants.router.ts';
import { usageRouter } from '../modules/usage/usage.router.ts';
import { publicProcedure, router } from './init.ts';

export const appRouter = router({
  auth: authRouter,
  tenants: tenantsRouter,
  keys: keysRouter,
  adminTokens: adminTokensRouter,
  catalog: catalogRouter,
  deployments: deploymentsRouter,
  usage: usageRouter,
  audit: auditRouter,
  nodeCredentials: nodeCredentialsRouter,
  platform: router({
    /** Public base URLs the console shows (the shared base and the data-plane origin). */
    urls: publicProcedure.query(({ ctx }) => ({ ...ctx.publicUrls, beta: true })),
  }),
});

export type AppRouter = typeof appRouter;
