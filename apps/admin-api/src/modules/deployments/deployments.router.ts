import { z } from 'zod';
import { router, tenantProcedure } from '../../trpc/init.ts';
import {
  deleteDeployment, deployEndpoint, getDeployment, listDeployments, scaleDeployment, startDeployment, stopDeployment,
} from './deployments.service.ts';
import { provisionerKinds } from './provisioners/provisioner.ts';

const replicas = z.number().int().min(0).max(1000);
const ref = z.object({ deploymentId: z.uuid() });

/** Thin adapter over the deployment service, which holds the rules (tenant role, state machine, provisioners). */
export const deploymentsRouter = router({
  list: tenantProcedure.query(({ ctx }) => listDeployments(ctx.deployments, ctx.principal, ctx.tenantId)),
  get: tenantProcedure.input(ref).query(({ ctx, input }) =>
    getDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId }),
  ),
  /** Deploys a catalog entry (by Name) as the tenant's dedicated endpoint; returns at once in `provisioning`. */
  create: tenantProcedure
    .input(
      z.object({
        entryName: z.string().min(1).max(200),
        minReplicas: replicas.default(1),
        maxReplicas: replicas.default(1),
        provisioner: z.enum(provisionerKinds).default('local'),
        externalUrl: z.string().max(2000).nullable().optional(),
      }),
    )
    .mutation(({ ctx, input }) => deployEndpoint(ctx.deployments, ctx.principal, { ...input, tenantId: ctx.tenantId })),
  scale: tenantProcedure
    .input(ref.extend({ minReplicas: replicas, maxReplicas: replicas }))
    .mutation(({ ctx, input }) => scaleDeployment(ctx.deployments, ctx.principal, { ...input, tenantId: ctx.tenantId })),
  stop: tenantProcedure.input(ref).mutation(({ ctx, input }) =>
    stopDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId }),
  ),
  start: tenantProcedure.input(ref).mutation(({ ctx, input }) =>
    startDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId }),
  ),
  delete: tenantProcedure.input(ref).mutation(async ({ ctx, input }) => {
    await deleteDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId });
    return { ok: true as const };
  }),
});
