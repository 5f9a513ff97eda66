import type { Db } from '../../db.ts';
import { withArgumentNames } from '../../error-mapping.ts';
import { builder } from '../../graphql/builder.ts';
import { buildIntegration, dedicatedModelName } from '../catalog/integration.ts';
import { TenantRef } from '../tenants/tenants.graphql.ts';
import { getTenantById } from '../tenants/tenants.service.ts';
import { Endpoint } from '../catalog/catalog.graphql.ts';
import {
  deleteDeployment,
  deployEndpoint,
  getDeployment,
  getDeploymentsGpuSeconds,
  listDeployments,
  scaleDeployment,
  startDeployment,
  stopDeployment,
  wakeDeployment,
  type AutoscalingView,
  type DeploymentView,
  type ReplicaView,
} from './deployments.service.ts';
import { NO_SAMPLES, observedColdStarts, type ObservedColdStart } from './node-load.ts';
import { batched } from '../../graphql/context.ts';
import { provisionerKinds } from './provisioners/provisioner.ts';
import { availableProvisioners } from './available-provisioners.ts';

/** A deployment with the slug of its tenant (for its URLs). */
type DeploymentShape = DeploymentView & { tenantSlug: string };

const DeploymentStateEnum = builder.enumType('DeploymentState', {
  values: {
    PENDING: { value: 'pending' },
    PROVISIONING: { value: 'provisioning' },
    RUNNING: { value: 'running' },
    SCALING: { value: 'scaling' },
    SCALED_TO_ZERO: { value: 'scaled_to_zero', description: 'Idle with no replica; the next request (or wakeDeployment) starts one.' },
    STOPPED: { value: 'stopped' },
    FAILED: { value: 'failed' },
  } as const,
});

const ProvisionerEnum = builder.enumType('Provisioner', {
  values: Object.fromEntries(provisionerKinds.map((k) => [k.toUpperCase(), { value: k }])) as Record<
    Uppercase<(typeof provisionerKinds)[number]>,
    { value: (typeof provisionerKinds)[number] }
  >,
});

const ReplicaRef = builder.objectRef<ReplicaView>('Replica').implement({
  description: 'A runtime replica of a deployment (internal addresses are not shown).',
  fields: (t) => ({
    id: t.exposeID('id'),
    state: t.exposeString('state', { description: 'starting, ready, stopped or failed.' }),
    kind: t.exposeString('kind', { description: 'Runtime kind (vllm, sglang, tgi, ollama, llamacpp, sim, …).' }),
    servedModel: t.exposeString('servedModel'),
    createdAt: t.field({ type: 'DateTime', resolve: (r) => r.createdAt }),
  }),
});

const Autoscaling = builder.objectRef<AutoscalingView>('Autoscaling').implement({
  description: 'How the autoscaler sizes a deployment (docs/autoscaling.md).',
  fields: (t) => ({
    targetConcurrency: t.exposeInt('targetConcurrency', {
      description: 'Requests one replica should carry at once (resolved: the default is the entry base concurrency x its Concurrency multiplier).',
    }),
    targetConcurrencyIsDefault: t.exposeBoolean('targetConcurrencyIsDefault'),
    scaleToZeroAfterSeconds: t.exposeInt('scaleToZeroAfterSeconds', { description: 'Idle time (nothing in flight or held) before the last replica stops.' }),
    scaleDownDelaySeconds: t.exposeInt('scaleDownDelaySeconds', { description: 'Load must stay lower this long before replicas are removed.' }),
  }),
});

const AutoscalingInput = builder.inputType('AutoscalingInput', {
  description: 'Autoscaling knobs; a field left out keeps its current (or default) value.',
  fields: (t) => ({
    targetConcurrency: t.int({ description: 'Requests per replica (1 to 10000); null: the entry default.' }),
    scaleToZeroAfterSeconds: t.int({ description: 'At least 10 (default 900).' }),
    scaleDownDelaySeconds: t.int({ description: 'At least 0 (default 60).' }),
  }),
});

const ObservedColdStartRef = builder.objectRef<ObservedColdStart>('ObservedColdStart').implement({
  description: 'Measured time to first token of requests that waited for a cold start (latest 1000).',
  fields: (t) => ({
    samples: t.exposeInt('samples'),
    p50Seconds: t.exposeFloat('p50Seconds', { nullable: true }),
    p95Seconds: t.exposeFloat('p95Seconds', { nullable: true }),
  }),
});

builder.objectField(Endpoint, 'observedColdStart', (t) =>
  t.field({
    type: ObservedColdStartRef,
    description: 'Cold starts measured on dedicated deployments of this entry, beside the stated Cold Start TTFT.',
    complexity: 5,
    // Every entry of a page asks in the same tick: one query for all of them (it was one per entry: 500 for a page).
    resolve: (entry, _args, ctx) => batched(ctx, 'observedColdStart', entry.id, (ids) => observedColdStarts(ctx.db, ids), NO_SAMPLES),
  }),
);

/** A deployment without GPU time in the range. */
const NO_GPU_TIME = { boot: 0, serving: 0, idle: 0, total: 0 } as const;

const Deployment = builder.objectRef<DeploymentShape>('Deployment').implement({
  description: "A tenant's dedicated deployment of a catalog endpoint.",
  fields: (t) => ({
    id: t.exposeID('id'),
    tenantId: t.exposeID('tenantId'),
    endpointId: t.exposeID('entryId'),
    endpointName: t.exposeString('entryName', { description: 'The catalog Name (the <endpoint_name> path segment).' }),
    state: t.field({ type: DeploymentStateEnum, resolve: (d) => d.state }),
    minReplicas: t.exposeInt('minReplicas'),
    maxReplicas: t.exposeInt('maxReplicas'),
    readyReplicas: t.exposeInt('readyReplicas', { description: 'Replicas taking traffic.' }),
    desiredReplicas: t.exposeInt('desiredReplicas', { description: "The autoscaler's latest decision (within min and max)." }),
    autoscaling: t.field({ type: Autoscaling, resolve: (d) => d.autoscaling }),
    lastScaleReason: t.exposeString('lastScaleReason', { nullable: true, description: 'Why the desired count last changed.' }),
    lastScaleAt: t.field({ type: 'DateTime', nullable: true, resolve: (d) => d.lastScaleAt }),
    gpuSeconds: t.float({
      description: 'GPU-seconds billed in [from, to) (default: the last 30 days): replica lifetime x the entry GPU Count, boot, serving and idle.',
      args: { from: t.arg({ type: 'DateTime' }), to: t.arg({ type: 'DateTime' }) },
      complexity: 5,
      // Every deployment of a list (same tenant and range) in one ledger query.
      resolve: async (d, args, ctx) =>
        (
          await batched(
            ctx,
            `gpuSeconds:${d.tenantId}:${args.from?.toISOString() ?? ''}:${args.to?.toISOString() ?? ''}`,
            d.id,
            (ids) => getDeploymentsGpuSeconds(ctx.deployments, ctx.principal, { tenantId: d.tenantId, deploymentIds: ids, from: args.from, to: args.to }),
            NO_GPU_TIME,
          )
        ).total,
    }),
    replicas: t.field({ type: [ReplicaRef], complexity: { field: 1, multiplier: 4 }, resolve: (d) => [...d.replicas] }),
    provisioner: t.exposeString('provisioner'),
    lastError: t.exposeString('lastError', { nullable: true }),
    apiBaseUrl: t.string({
      description: 'The tenant-scoped base URL: `{base_url}/funccall/<tenant>/endpoints/<Name>/v1`.',
      resolve: (d, _args, ctx) => buildIntegration(ctx.publicUrls, { name: d.entryName, provider: d.provider }, 'dedicated', d.tenantSlug).apiBaseUrl,
    }),
    chatCompletionsUrl: t.string({
      resolve: (d, _args, ctx) =>
        `${buildIntegration(ctx.publicUrls, { name: d.entryName, provider: d.provider }, 'dedicated', d.tenantSlug).apiBaseUrl}/chat/completions`,
    }),
    modelName: t.string({
      description: 'The provider-prefixed `model` value the examples send (the Name also works; it may be left out).',
      resolve: (d) => dedicatedModelName(d.entryName, d.provider),
    }),
    createdAt: t.field({ type: 'DateTime', resolve: (d) => d.createdAt }),
    updatedAt: t.field({ type: 'DateTime', resolve: (d) => d.updatedAt }),
  }),
});

builder.objectFields(TenantRef, (t) => ({
  deployments: t.field({
    type: [Deployment],
    description: "The tenant's dedicated deployments.",
    resolve: async (tenant, _args, ctx) => (await listDeployments(ctx.deployments, ctx.principal, tenant.id)).map((d) => ({ ...d, tenantSlug: tenant.slug })),
  }),
  deployment: t.field({
    type: Deployment,
    nullable: true,
    description: 'One deployment of the tenant (another tenant\'s is "not found").',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (tenant, args, ctx) => ({
      ...(await getDeployment(ctx.deployments, ctx.principal, { tenantId: tenant.id, deploymentId: String(args.id) })),
      tenantSlug: tenant.slug,
    }),
  }),
}));

async function slugOf(ctx: { db: Db }, tenantId: string): Promise<string> {
  return (await getTenantById(ctx.db, tenantId))?.slug ?? '';
}

builder.mutationFields((t) => ({
  deployEndpoint: t.field({
    type: Deployment,
    description: "Deploys a catalog endpoint (by Name) as the tenant's dedicated endpoint (members); returns at once in PROVISIONING.",
    args: {
      tenantId: t.arg.id({ required: true }),
      endpointName: t.arg.string({ required: true }),
      minReplicas: t.arg.int({ defaultValue: 0, description: '0 (the default) scales to zero when idle.' }),
      maxReplicas: t.arg.int({ defaultValue: 1 }),
      provisioner: t.arg({ type: ProvisionerEnum, defaultValue: 'local' }),
      externalUrl: t.arg.string({ description: 'Required for EXTERNAL: the runtime base URL.' }),
      autoscaling: t.arg({ type: AutoscalingInput }),
    },
    resolve: async (_root, args, ctx) => {
      const tenantId = String(args.tenantId);
      const d = await withArgumentNames({ entryName: 'endpointName' }, () =>
        deployEndpoint(ctx.deployments, ctx.principal, {
          tenantId,
          entryName: args.endpointName,
          minReplicas: args.minReplicas ?? 0,
          maxReplicas: args.maxReplicas ?? 1,
          provisioner: args.provisioner ?? 'local',
          externalUrl: args.externalUrl ?? null,
          autoscaling: args.autoscaling ?? null,
        }),
      );
      return { ...d, tenantSlug: await slugOf(ctx, tenantId) };
    },
  }),
  scaleDeployment: t.field({
    type: Deployment,
    description: 'Changes replica bounds and autoscaling knobs (members).',
    args: {
      tenantId: t.arg.id({ required: true }),
      id: t.arg.id({ required: true }),
      minReplicas: t.arg.int({ required: true }),
      maxReplicas: t.arg.int({ required: true }),
      autoscaling: t.arg({ type: AutoscalingInput }),
    },
    resolve: async (_root, args, ctx) => {
      const tenantId = String(args.tenantId);
      const d = await scaleDeployment(ctx.deployments, ctx.principal, {
        tenantId,
        deploymentId: String(args.id),
        minReplicas: args.minReplicas,
        maxReplicas: args.maxReplicas,
        autoscaling: args.autoscaling ?? null,
      });
      return { ...d, tenantSlug: await slugOf(ctx, tenantId) };
    },
  }),
  wakeDeployment: t.field({
    type: Deployment,
    description: 'Pre-warms a deployment ahead of traffic: at least one replica now, until it is idle for scaleToZeroAfterSeconds (members).',
    args: { id: t.arg.id({ required: true }), tenantId: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const tenantId = String(args.tenantId);
      const d = await wakeDeployment(ctx.deployments, ctx.principal, { tenantId, deploymentId: String(args.id) });
      return { ...d, tenantSlug: await slugOf(ctx, tenantId) };
    },
  }),
  stopDeployment: t.field({
    type: Deployment,
    description: 'Stops serving at once and stops the replicas (members).',
    args: { tenantId: t.arg.id({ required: true }), id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const tenantId = String(args.tenantId);
      const d = await stopDeployment(ctx.deployments, ctx.principal, { tenantId, deploymentId: String(args.id) });
      return { ...d, tenantSlug: await slugOf(ctx, tenantId) };
    },
  }),
  startDeployment: t.field({
    type: Deployment,
    description: 'Starts a stopped or failed deployment again (members).',
    args: { tenantId: t.arg.id({ required: true }), id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const tenantId = String(args.tenantId);
      const d = await startDeployment(ctx.deployments, ctx.principal, { tenantId, deploymentId: String(args.id) });
      return { ...d, tenantSlug: await slugOf(ctx, tenantId) };
    },
  }),
  deleteDeployment: t.field({
    type: 'Boolean',
    description: 'Removes the deployment and its route (members); true when done.',
    args: { tenantId: t.arg.id({ required: true }), id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      await deleteDeployment(ctx.deployments, ctx.principal, { tenantId: String(args.tenantId), deploymentId: String(args.id) });
      return true;
    },
  }),
}));

builder.queryFields((t) => ({
  provisioners: t.field({
    type: [ProvisionerEnum],
    description: 'The provisioners this control plane can deploy with (KUBERNETES only when configured).',
    resolve: (_root, _args, ctx) => availableProvisioners(ctx.deployments, ctx.principal),
  }),
}));
