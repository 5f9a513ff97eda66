// Dedicated deployments: every business rule of deploy/scale/stop/start/delete lives here; tRPC and
// GraphQL call these functions. Replicas are started in the background by the reconciler.
import type { DeploymentState, RuntimeKind } from '@infer/shared';
import type { ReplicaState } from '@infer/db';
import { checkNameCharacters, checkUrlLength, MAX_ENTRY_NAME_LENGTH } from '../../check-name.ts';
import { notFound, ServiceError } from '../../errors.ts';
import { isPlatformAdmin, requireTenantRole } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import type { DeploymentsContext } from './deployments-context.ts';
import {
  createDeployment,
  deleteDeploymentRow,
  findDeploymentById,
  findTenantDeployment,
  listReplicas,
  listReplicasOf,
  listTenantDeployments,
  setReplicasState,
  recordScaleDecision,
  transitionDeployment,
  updateDeploymentScale,
  SERVING_STATES,
  type AutoscalingSettings,
  type Deployment,
  type Replica,
  type TransitionInput,
} from './deployment-store.ts';
import { gpuSecondsByDeployment, gpuSecondsOf, hasGpuTime, type GpuSeconds } from './gpu-ledger.ts';
import { resolveTargetConcurrency } from './target-concurrency.ts';
import { normaliseRuntimeUrl } from './provisioners/external/external-provisioner.ts';
import { AddressRefusedError } from '@infer/shared/address-guard';
import { provisionerKinds, type ProvisionerKind } from './provisioners/provisioner.ts';
import { AUTOSCALING_LIMITS, MAX_REPLICAS } from '@infer/shared/deployment-limits';
import { usageRange } from '../usage/usage.service.ts';

// The row-level functions stay available (seed, tests, provisioners).
export { createDeployment, setDeploymentState, registerReplica, setReplicaState, removeReplica, listReplicas } from './deployment-store.ts';
export type { Deployment, Replica, CreateDeploymentInput } from './deployment-store.ts';

// The one max-replica bound and the autoscaling bounds (tRPC and GraphQL leave them to this service; the
// console imports the same module from `@infer/shared/deployment-limits`).
export { MAX_REPLICAS, AUTOSCALING_LIMITS } from '@infer/shared/deployment-limits';

/** Autoscaling knobs as callers give them: absent keeps the current (or default) value; targetConcurrency null = the entry's default. */
export interface AutoscalingInput {
  readonly targetConcurrency?: number | null;
  readonly scaleToZeroAfterSeconds?: number | null;
  readonly scaleDownDelaySeconds?: number | null;
}

/** Autoscaling as shown: the stored knobs with the target resolved. */
export interface AutoscalingView {
  /** Requests per replica the autoscaler aims at (resolved). */
  readonly targetConcurrency: number;
  /** True when it is the entry's default (base concurrency x the entry's Concurrency multiplier). */
  readonly targetConcurrencyIsDefault: boolean;
  readonly scaleToZeroAfterSeconds: number;
  readonly scaleDownDelaySeconds: number;
}

/** A replica as tenants see it (no pids, ports or internal URLs). */
export interface ReplicaView {
  readonly id: string;
  readonly state: ReplicaState;
  readonly kind: RuntimeKind;
  readonly servedModel: string;
  readonly createdAt: Date;
}

export interface DeploymentView extends Deployment {
  readonly replicas: readonly ReplicaView[];
  /** Replicas taking traffic. */
  readonly readyReplicas: number;
  readonly autoscaling: AutoscalingView;
}

export interface DeployEndpointInput {
  readonly tenantId: string;
  /** The catalog Name; the entry must be offered as dedicated. */
  readonly entryName: string;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly provisioner: ProvisionerKind;
  /** Required for 'external': the runtime's base URL (with or without `/v1`). */
  readonly externalUrl?: string | null;
  readonly autoscaling?: AutoscalingInput | null;
}

export interface ScaleDeploymentInput {
  readonly tenantId: string;
  readonly deploymentId: string;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly autoscaling?: AutoscalingInput | null;
}

export interface DeploymentRef {
  readonly tenantId: string;
  readonly deploymentId: string;
}

/**
 * The one home of the scaling rules (every surface reaches here): replica bounds and autoscaling knobs.
 * Returns the knobs to store (absent ones left out).
 */
function validateScaling(minReplicas: number, maxReplicas: number, autoscaling: AutoscalingInput | null | undefined): Partial<AutoscalingSettings> {
  if (!Number.isInteger(minReplicas) || minReplicas < 0 || minReplicas > MAX_REPLICAS) {
    throw new ServiceError('invalid', `minReplicas must be an integer from 0 to ${MAX_REPLICAS}`, 'minReplicas');
  }
  if (!Number.isInteger(maxReplicas) || maxReplicas < 1 || maxReplicas > MAX_REPLICAS) {
    throw new ServiceError('invalid', `maxReplicas must be an integer from 1 to ${MAX_REPLICAS}`, 'maxReplicas');
  }
  if (minReplicas > maxReplicas) throw new ServiceError('invalid', 'minReplicas must not exceed maxReplicas', 'minReplicas');
  const out: { -readonly [K in keyof AutoscalingSettings]?: AutoscalingSettings[K] } = {};
  const a = autoscaling ?? {};
  const L = AUTOSCALING_LIMITS;
  const int = (field: 'targetConcurrency' | 'scaleToZeroAfterSeconds' | 'scaleDownDelaySeconds', v: number): number => {
    const { min, max } = L[field];
    if (!Number.isInteger(v) || v < min || v > max) {
      throw new ServiceError('invalid', `autoscaling.${field} must be an integer from ${min} to ${max}`, `autoscaling.${field}`);
    }
    return v;
  };
  if (a.targetConcurrency !== undefined) out.targetConcurrency = a.targetConcurrency === null ? null : int('targetConcurrency', a.targetConcurrency);
  if (a.scaleToZeroAfterSeconds !== undefined && a.scaleToZeroAfterSeconds !== null)
    out.scaleToZeroAfterSeconds = int('scaleToZeroAfterSeconds', a.scaleToZeroAfterSeconds);
  if (a.scaleDownDelaySeconds !== undefined && a.scaleDownDelaySeconds !== null)
    out.scaleDownDelaySeconds = int('scaleDownDelaySeconds', a.scaleDownDelaySeconds);
  return out;
}

async function validateExternalUrl(ctx: DeploymentsContext, raw: string | null | undefined): Promise<string> {
  if (!raw) throw new ServiceError('invalid', 'externalUrl is required for the external provisioner', 'externalUrl');
  checkUrlLength(raw, 'externalUrl'); // GraphQL's argument has no cap of its own
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ServiceError('invalid', 'externalUrl must be an http(s) URL', 'externalUrl');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ServiceError('invalid', 'externalUrl must be an http(s) URL', 'externalUrl');
  if (url.username || url.password || url.search || url.hash) {
    throw new ServiceError('invalid', 'externalUrl must not carry credentials, a query or a fragment', 'externalUrl');
  }
  // The data plane will forward tenants' traffic there: keep them off the platform's own network. The name
  // is resolved and every address checked (the probes and the data plane check again at each connection).
  // Platform admins get no exception: the data plane would refuse the address anyway (operators allow-list).
  try {
    await ctx.addressGuard.check(url.hostname);
  } catch (err) {
    if (err instanceof AddressRefusedError) throw new ServiceError('invalid', `externalUrl must be a public address: ${err.message}`, 'externalUrl');
    throw err;
  }
  return normaliseRuntimeUrl(url.toString());
}

async function toView(ctx: DeploymentsContext, d: Deployment): Promise<DeploymentView> {
  return viewOf(ctx, d, await listReplicas(ctx.db, d.id));
}

function viewOf(ctx: DeploymentsContext, d: Deployment, rows: readonly Replica[]): DeploymentView {
  const replicas = rows.map(({ id, state, kind, servedModel, createdAt }: Replica): ReplicaView => ({
    id,
    state,
    kind,
    servedModel,
    createdAt,
  }));
  const autoscaling: AutoscalingView = {
    targetConcurrency: resolveTargetConcurrency(d, ctx.replicaBaseConcurrency),
    targetConcurrencyIsDefault: d.targetConcurrency === null,
    scaleToZeroAfterSeconds: d.scaleToZeroAfterSeconds,
    scaleDownDelaySeconds: d.scaleDownDelaySeconds,
  };
  return { ...d, replicas, readyReplicas: replicas.filter((r) => r.state === 'ready').length, autoscaling };
}

async function requireDeployment(ctx: DeploymentsContext, ref: DeploymentRef): Promise<Deployment> {
  const d = await findTenantDeployment(ctx.db, ref.tenantId, ref.deploymentId);
  if (!d) throw notFound('deployment');
  return d;
}

async function move(
  ctx: DeploymentsContext,
  principal: Principal,
  d: Deployment,
  from: readonly DeploymentState[],
  to: DeploymentState,
  verb: string,
  desired?: TransitionInput['desired'],
): Promise<Deployment> {
  if (!from.includes(d.state)) throw new ServiceError('invalid', `cannot ${verb} a deployment that is ${d.state}`, 'state');
  const moved = await transitionDeployment(ctx.db, { deploymentId: d.id, from, to, actor: actorOf(principal), ...(desired ? { desired } : {}) });
  if (!moved) throw new ServiceError('conflict', `the deployment changed meanwhile; reload and try again`, 'state');
  return moved;
}

/**
 * Deploys a catalog entry as the tenant's dedicated endpoint. Any member of the tenant may (owners and
 * members alike; platform admins and the tenant's admin tokens act as owners). Returns at once in
 * `provisioning`; the reconciler starts `minReplicas` replicas (none: `scaled_to_zero`, woken by the
 * first request) and the autoscaler takes it from there.
 */
export async function deployEndpoint(ctx: DeploymentsContext, principal: Principal, input: DeployEndpointInput): Promise<DeploymentView> {
  requireTenantRole(principal, input.tenantId, 'member');
  checkNameCharacters(input.entryName, 'entryName');
  // No entry has a longer Name: refused before any query (and never echoed back at length).
  if (input.entryName.length > MAX_ENTRY_NAME_LENGTH) {
    throw new ServiceError('invalid', `entryName must be at most ${MAX_ENTRY_NAME_LENGTH} characters`, 'entryName');
  }
  const autoscaling = validateScaling(input.minReplicas, input.maxReplicas, input.autoscaling);
  if (!provisionerKinds.includes(input.provisioner) || !ctx.provisioners[input.provisioner]) {
    const available = provisionerKinds.filter((k) => ctx.provisioners[k]);
    throw new ServiceError('invalid', `provisioner must be one of ${available.join(', ')}`, 'provisioner');
  }
  // A URL with another provisioner would be dropped and replicas started instead: the caller meant the external one.
  if (input.provisioner !== 'external' && input.externalUrl !== undefined && input.externalUrl !== null) {
    throw new ServiceError('invalid', `externalUrl is only for the external provisioner (this deployment's is ${input.provisioner})`, 'externalUrl');
  }
  const externalUrl = input.provisioner === 'external' ? await validateExternalUrl(ctx, input.externalUrl) : null;
  const actor = actorOf(principal);
  const d = await withTransaction(ctx.db, async (trx) => {
    const created = await createDeployment(trx, { ...input, externalUrl, autoscaling, actor, onlyPublished: !isPlatformAdmin(principal) });
    return (await transitionDeployment(trx, { deploymentId: created.id, from: ['pending'], to: 'provisioning', actor })) ?? created;
  });
  void ctx.reconciler.schedule(d.id);
  return toView(ctx, d);
}

/**
 * Changes replica bounds and autoscaling knobs in any state; the desired count moves into the new bounds
 * at once and a serving deployment converges to it (then the autoscaler decides within the bounds).
 */
export async function scaleDeployment(ctx: DeploymentsContext, principal: Principal, input: ScaleDeploymentInput): Promise<DeploymentView> {
  requireTenantRole(principal, input.tenantId, 'member');
  await requireDeployment(ctx, input);
  const autoscaling = validateScaling(input.minReplicas, input.maxReplicas, input.autoscaling);
  const d = await updateDeploymentScale(ctx.db, { ...input, autoscaling, actor: actorOf(principal) });
  if (SERVING_STATES.includes(d.state)) {
    ctx.reconciler.resetFailures(d.id);
    void ctx.reconciler.schedule(d.id);
  }
  return toView(ctx, d);
}

/**
 * Pre-warms a deployment ahead of traffic (members): at least one replica at once, kept until the
 * autoscaler finds it idle for scaleToZeroAfterSeconds. A stopped or failed deployment must be started.
 */
export async function wakeDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<DeploymentView> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const d = await requireDeployment(ctx, ref);
  if (!SERVING_STATES.includes(d.state)) throw new ServiceError('invalid', `cannot wake a deployment that is ${d.state}; start it first`, 'state');
  return toView(ctx, (await wake(ctx, d, 'wake requested', actorOf(principal))) ?? d);
}

/** Wakes a deployment for a node holding a request for it (node-authenticated): returns its state. */
export async function wakeForNode(ctx: DeploymentsContext, nodeId: string, deploymentId: string): Promise<{ state: string }> {
  const d = await findDeploymentById(ctx.db, deploymentId);
  if (!d) throw notFound('deployment');
  if (!SERVING_STATES.includes(d.state)) return { state: d.state };
  const woken = await wake(ctx, d, `request held on node ${nodeId.slice(0, 64)}`);
  return { state: (woken ?? d).state };
}

async function wake(ctx: DeploymentsContext, d: Deployment, reason: string, actor?: ReturnType<typeof actorOf>): Promise<Deployment | null> {
  ctx.reconciler.resetFailures(d.id);
  let out: Deployment | null = d;
  if (d.desiredReplicas < 1 && d.maxReplicas >= 1) {
    // A held request waits for this replica: its process is spawned first (the pass's floor of one), and the
    // decision's bookkeeping (desired count, audit, outbox) is written while the runtime boots, not before.
    const release = ctx.reconciler.holdAtLeast(d.id, 1);
    try {
      await ctx.reconciler.schedule(d.id);
      out = await recordScaleDecision(ctx.db, {
        deploymentId: d.id,
        desiredReplicas: 1,
        reason: `0 -> 1: ${reason}`,
        state: { from: ['scaled_to_zero'], to: 'scaling' },
        actor,
      });
    } finally {
      release();
    }
  }
  // After the spawn: the autoscaler's tick would otherwise compete with the start for the database.
  ctx.wakes.notify(d.id);
  void ctx.reconciler.schedule(d.id);
  return out;
}

/**
 * GPU-seconds of one of the tenant's deployments in [from, to), by phase (members); the range rules are usage's
 * (`usageRange`). Another tenant's deployment, or an id that never was, is "not found" (as `getDeployment`).
 */
export async function getDeploymentGpuSeconds(
  ctx: DeploymentsContext,
  principal: Principal,
  ref: DeploymentRef & { readonly from?: Date | null; readonly to?: Date | null },
): Promise<GpuSeconds> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const { from, to } = usageRange(ref);
  // Deleted deployments stay billable: the tenant's ledger still knows them when the deployment row is gone.
  if (!(await findTenantDeployment(ctx.db, ref.tenantId, ref.deploymentId)) && !(await hasGpuTime(ctx.db, ref))) throw notFound('deployment');
  return gpuSecondsOf(ctx.db, { tenantId: ref.tenantId, deploymentId: ref.deploymentId, from, to });
}

/**
 * GPU-seconds in [from, to) of several of the tenant's deployments in one query (GraphQL's Deployment.gpuSeconds over a
 * list). The ledger is read within the tenant, so an id of another tenant's (or no) deployment answers zero.
 */
export async function getDeploymentsGpuSeconds(
  ctx: DeploymentsContext,
  principal: Principal,
  ref: { readonly tenantId: string; readonly deploymentIds: readonly string[]; readonly from?: Date | null; readonly to?: Date | null },
): Promise<Map<string, GpuSeconds>> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const { from, to } = usageRange(ref);
  return gpuSecondsByDeployment(ctx.db, { tenantId: ref.tenantId, deploymentIds: ref.deploymentIds, from, to });
}

/** Stops serving at once (replicas leave the routing table in the same step) and stops the replicas in the background. */
export async function stopDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<DeploymentView> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const current = await requireDeployment(ctx, ref);
  const d = await withTransaction(ctx.db, async (trx) => {
    const moved = await move({ ...ctx, db: trx }, principal, current, ['pending', ...SERVING_STATES, 'failed'], 'stopped', 'stop', {
      to: 'zero',
      reason: 'stopped',
    });
    await setReplicasState(trx, moved.id, 'stopped');
    return moved;
  });
  void ctx.reconciler.schedule(d.id);
  return toView(ctx, d);
}

/**
 * Starts a stopped or failed deployment again (-> provisioning) at `minReplicas`, as a new deployment starts (none:
 * it settles scaled to zero until its first request); the autoscaler takes it from there.
 */
export async function startDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<DeploymentView> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const current = await requireDeployment(ctx, ref);
  const d = await move(ctx, principal, current, ['stopped', 'failed'], 'provisioning', 'start', { to: 'min', reason: 'started at minReplicas' });
  ctx.reconciler.resetFailures(d.id);
  void ctx.reconciler.schedule(d.id);
  return toView(ctx, d);
}

/** Removes the deployment and its route, and waits until its replicas are stopped. */
export async function deleteDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<void> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const d = await requireDeployment(ctx, ref);
  const replicas = await listReplicas(ctx.db, d.id);
  await deleteDeploymentRow(ctx.db, { ...ref, actor: actorOf(principal) });
  const provisioner = ctx.provisioners[d.provisioner as ProvisionerKind];
  // The replicas go after any reconcile in flight (whose late starts stop themselves once they find the row gone) and
  // the drain grace, in the background as a stop's do: the deletion is already in the nodes' snapshot.
  void ctx.reconciler
    .retireDeleted(d.id, provisioner, replicas)
    .then(() => ctx.reconciler.schedule(d.id))
    .catch((err: unknown) => ctx.log.warn({ err, deploymentId: d.id }, 'stopping the replicas of a deleted deployment failed'));
}

/** The tenant's deployments with their replicas. */
export async function listDeployments(ctx: DeploymentsContext, principal: Principal, tenantId: string): Promise<DeploymentView[]> {
  requireTenantRole(principal, tenantId, 'member');
  const rows = await listTenantDeployments(ctx.db, tenantId);
  const replicas = await listReplicasOf(
    ctx.db,
    rows.map((d) => d.id),
  );
  return rows.map((d) => viewOf(ctx, d, replicas.get(d.id) ?? []));
}

/** One of the tenant's deployments; another tenant's is "not found". */
export async function getDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<DeploymentView> {
  requireTenantRole(principal, ref.tenantId, 'member');
  return toView(ctx, await requireDeployment(ctx, ref));
}
