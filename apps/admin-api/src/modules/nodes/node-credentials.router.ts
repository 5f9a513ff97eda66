import { z } from 'zod';
import { authedProcedure, router } from '../../trpc/init.ts';
import { createNodeCredential, listNodeCredentials, revokeNodeCredential } from './node-credentials.service.ts';

/** Platform admins: data-plane node credentials (the service checks the role and audits). */
export const nodeCredentialsRouter = router({
  list: authedProcedure.query(({ ctx }) => listNodeCredentials(ctx.db, ctx.principal)),
  /** The secret (`infn_…`) is in this response only. */
  create: authedProcedure
    .input(z.object({ name: z.string().min(1).max(100) }))
    .mutation(({ ctx, input }) => createNodeCredential(ctx.db, ctx.principal, input)),
  revoke: authedProcedure.input(z.object({ id: z.uuid() })).mutation(({ ctx, input }) => revokeNodeCredential(ctx.db, ctx.principal, input)),
});
