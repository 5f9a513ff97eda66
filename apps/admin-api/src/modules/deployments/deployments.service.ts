// Dedicated deployments: every business rule of deploy/scale/stop/start/delete lives here; tRPC and
// GraphQL call these functions. Replicas are started in the background by the reconciler.
import type { DeploymentState, RuntimeKind } from '@infer/shared';
import type { ReplicaState } from '@infer/db';
import { notFound, ServiceError } from '../../errors.ts';
import { requireTenantRole } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import type { DeploymentsContext } from './deployments-context.ts';
import {
  createDeployment, deleteDeploymentRow, findTenantDeployment, listReplicas, listTenantDeployments, setReplicasState,
  transitionDeployment, updateDeploymentScale, type Deployment, type Replica,
} from './deployment-store.ts';
import { normaliseRuntimeUrl } from './provisioners/external/external-provisioner.ts';
import { AddressRefusedError } from '@infer/shared/address-guard';
import { provisionerKinds, type ProvisionerKind } from './provisioners/provisioner.ts';

// The row-level functions stay available (seed, tests, provisioners).
export {
  createDeployment, setDeploymentState, registerReplica, setReplicaState, removeReplica, listReplicas,
} from './deployment-store.ts';
export type { Deployment, Replica, CreateDeploymentInput } from './deployment-store.ts';

/** Most replicas one deployment may ask for. */
export const MAX_REPLICAS = 8;

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
}

export interface ScaleDeploymentInput {
  readonly tenantId: string;
  readonly deploymentId: string;
  readonly minReplicas: number;
  readonly maxReplicas: number;
}

export interface DeploymentRef {
  readonly tenantId: string;
  readonly deploymentId: string;
}

function validateScale(minReplicas: number, maxReplicas: number): void {
  if (!Number.isInteger(minReplicas) || minReplicas < 0) throw new ServiceError('invalid', 'minReplicas must be an integer >= 0', 'minReplicas');
  if (!Number.isInteger(maxReplicas) || maxReplicas < 1 || maxReplicas > MAX_REPLICAS) {
    throw new ServiceError('invalid', `maxReplicas must be an integer from 1 to ${MAX_REPLICAS}`, 'maxReplicas');
  }
  if (minReplicas > maxReplicas) throw new ServiceError('invalid', 'minReplicas must not exceed maxReplicas', 'minReplicas');
}

async function validateExternalUrl(ctx: DeploymentsContext, raw: string | null | undefined): Promise<string> {
  if (!raw) throw new ServiceError('invalid', 'externalUrl is required for the external provisioner', 'externalUrl');
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
  const replicas = (await listReplicas(ctx.db, d.id)).map(({ id, state, kind, servedModel, createdAt }: Replica): ReplicaView => ({ id, state, kind, servedModel, createdAt }));
  return { ...d, replicas, readyReplicas: replicas.filter((r) => r.state === 'ready').length };
}

async function requireDeployment(ctx: DeploymentsContext, ref: DeploymentRef): Promise<Deployment> {
  const d = await findTenantDeployment(ctx.db, ref.tenantId, ref.deploymentId);
  if (!d) throw notFound('deployment');
  return d;
}

async function move(ctx: DeploymentsContext, principal: Principal, d: Deployment, from: readonly DeploymentState[], to: DeploymentState, verb: string): Promise<Deployment> {
  if (!from.includes(d.state)) throw new ServiceError('invalid', `cannot ${verb} a deployment that is ${d.state}`, 'state');
  const moved = await transitionDeployment(ctx.db, { deploymentId: d.id, from, to, actor: actorOf(principal) });
  if (!moved) throw new ServiceError('conflict', `the deployment changed meanwhile; reload and try again`, 'state');
  return moved;
}

/**
 * Deploys a catalog entry as the tenant's dedicated endpoint. Any member of the tenant may (owners and
 * members alike; platform admins and the tenant's admin tokens act as owners). Returns at once in
 * `provisioning`; the reconciler starts `minReplicas` replicas and moves it to `running` or `failed`.
 */
export async function deployEndpoint(ctx: DeploymentsContext, principal: Principal, input: DeployEndpointInput): Promise<DeploymentView> {
  requireTenantRole(principal, input.tenantId, 'member');
  validateScale(input.minReplicas, input.maxReplicas);
  if (!provisionerKinds.includes(input.provisioner) || !ctx.provisioners[input.provisioner]) {
    const available = provisionerKinds.filter((k) => ctx.provisioners[k]);
    throw new ServiceError('invalid', `provisioner must be one of ${available.join(', ')}`, 'provisioner');
  }
  const externalUrl = input.provisioner === 'external' ? await validateExternalUrl(ctx, input.externalUrl) : null;
  const actor = actorOf(principal);
  const d = await withTransaction(ctx.db, async (trx) => {
    const created = await createDeployment(trx, { ...input, externalUrl, actor });
    return (await transitionDeployment(trx, { deploymentId: created.id, from: ['pending'], to: 'provisioning', actor })) ?? created;
  });
  void ctx.reconciler.schedule(d.id);
  return toView(ctx, d);
}

/** Changes replica bounds in any state; a provisioning or running deployment converges to `minReplicas`. */
export async function scaleDeployment(ctx: DeploymentsContext, principal: Principal, input: ScaleDeploymentInput): Promise<DeploymentView> {
  requireTenantRole(principal, input.tenantId, 'member');
  await requireDeployment(ctx, input);
  validateScale(input.minReplicas, input.maxReplicas);
  const d = await updateDeploymentScale(ctx.db, { ...input, actor: actorOf(principal) });
  if (d.state === 'provisioning' || d.state === 'running') void ctx.reconciler.schedule(d.id);
  return toView(ctx, d);
}

/** Stops serving at once (replicas leave the routing table in the same step) and stops the replicas in the background. */
export async function stopDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<DeploymentView> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const current = await requireDeployment(ctx, ref);
  const d = await withTransaction(ctx.db, async (trx) => {
    const moved = await move({ ...ctx, db: trx }, principal, current, ['pending', 'provisioning', 'running', 'failed'], 'stopped', 'stop');
    await setReplicasState(trx, moved.id, 'stopped');
    return moved;
  });
  void ctx.reconciler.schedule(d.id);
  return toView(ctx, d);
}

/** Starts a stopped or failed deployment again (-> provisioning). */
export async function startDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<DeploymentView> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const current = await requireDeployment(ctx, ref);
  const d = await move(ctx, principal, current, ['stopped', 'failed'], 'provisioning', 'start');
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
  // After any reconcile in flight (whose late starts stop themselves once they find the row gone).
  await ctx.reconciler.exclusive(d.id, async () => {
    for (const r of replicas) await provisioner?.stop(r).catch((err: unknown) => ctx.log.warn({ err, replicaId: r.id }, 'stopping a replica failed'));
  });
}

/** The tenant's deployments with their replicas. */
export async function listDeployments(ctx: DeploymentsContext, principal: Principal, tenantId: string): Promise<DeploymentView[]> {
  requireTenantRole(principal, tenantId, 'member');
  const rows = await listTenantDeployments(ctx.db, tenantId);
  return Promise.all(rows.map((d) => toView(ctx, d)));
}

/** One of the tenant's deployments; another tenant's is "not found". */
export async function getDeployment(ctx: DeploymentsContext, principal: Principal, ref: DeploymentRef): Promise<DeploymentView> {
  requireTenantRole(principal, ref.tenantId, 'member');
  return toView(ctx, await requireDeployment(ctx, ref));
}
