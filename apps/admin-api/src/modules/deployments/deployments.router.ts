import { MAX_ENTRY_NAME_LENGTH, MAX_URL_LENGTH } from '../../check-name.ts';
import { z } from 'zod';
import { authedProcedure, router, tenantProcedure } from '../../trpc/init.ts';
import {
  deleteDeployment,
  deployEndpoint,
  getDeployment,
  getDeploymentGpuSeconds,
  listDeployments,
  scaleDeployment,
  startDeployment,
  stopDeployment,
  wakeDeployment,
} from './deployments.service.ts';
import { provisionerKinds } from './provisioners/provisioner.ts';
import { availableProvisioners } from './available-provisioners.ts';
import { listDeploymentColdStarts } from './deployment-cold-starts.ts';

// Shapes only: ranges (MAX_REPLICAS, autoscaling bounds) are the service's, with errors naming the field.
const replicas = z.number().int();
const ref = z.object({ deploymentId: z.uuid() });
const autoscaling = z
  .object({
    targetConcurrency: z.number().int().nullable().optional(),
    scaleToZeroAfterSeconds: z.number().int().optional(),
    scaleDownDelaySeconds: z.number().int().optional(),
  })
  .strict()
  .nullable()
  .optional();
const instant = z.union([z.iso.datetime({ offset: true }), z.iso.date()]).transform((s) => new Date(s));

/** Thin adapter over the deployment service, which holds the rules (tenant role, state machine, provisioners). */
export const deploymentsRouter = router({
  /** The provisioners this control plane can deploy with (kubernetes only when configured). */
  provisioners: authedProcedure.query(({ ctx }) => availableProvisioners(ctx.deployments, ctx.principal)),
  list: tenantProcedure.query(({ ctx }) => listDeployments(ctx.deployments, ctx.principal, ctx.tenantId)),
  get: tenantProcedure
    .input(ref)
    .query(({ ctx, input }) => getDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId })),
  /** Deploys a catalog entry (by Name) as the tenant's dedicated endpoint; returns at once in `provisioning`. */
  create: tenantProcedure
    .input(
      z.object({
        entryName: z.string().min(1).max(MAX_ENTRY_NAME_LENGTH),
        minReplicas: replicas.default(0),
        maxReplicas: replicas.default(1),
        autoscaling,
        provisioner: z.enum(provisionerKinds).default('local'),
        externalUrl: z.string().max(MAX_URL_LENGTH).nullable().optional(),
      }),
    )
    .mutation(({ ctx, input }) => deployEndpoint(ctx.deployments, ctx.principal, { ...input, tenantId: ctx.tenantId })),
  scale: tenantProcedure
    .input(ref.extend({ minReplicas: replicas, maxReplicas: replicas, autoscaling }))
    .mutation(({ ctx, input }) => scaleDeployment(ctx.deployments, ctx.principal, { ...input, tenantId: ctx.tenantId })),
  /** Pre-warms: at least one replica now, kept until idle for scaleToZeroAfterSeconds. */
  wake: tenantProcedure
    .input(ref)
    .mutation(({ ctx, input }) => wakeDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId })),
  /** The deployment's latest cold starts (wait and time to first token) and the entry's observed p50/p95. */
  coldStarts: tenantProcedure
    .input(ref.extend({ limit: z.number().int().optional() }))
    .query(({ ctx, input }) => listDeploymentColdStarts(ctx.db, ctx.principal, { ...input, tenantId: ctx.tenantId })),
  /** GPU-seconds in [from, to) by phase (boot, serving, idle) and in total. */
  gpuSeconds: tenantProcedure
    .input(ref.extend({ from: instant.optional(), to: instant.optional() }))
    .query(({ ctx, input }) =>
      getDeploymentGpuSeconds(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId, from: input.from, to: input.to }),
    ),
  stop: tenantProcedure
    .input(ref)
    .mutation(({ ctx, input }) => stopDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId })),
  start: tenantProcedure
    .input(ref)
    .mutation(({ ctx, input }) => startDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId })),
  delete: tenantProcedure.input(ref).mutation(async ({ ctx, input }) => {
    await deleteDeployment(ctx.deployments, ctx.principal, { tenantId: ctx.tenantId, deploymentId: input.deploymentId });
    return { ok: true as const };
  }),
});
