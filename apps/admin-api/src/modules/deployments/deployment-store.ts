// Rows of deployments and their replicas; every routing change writes a config outbox row in its transaction.
import { sql } from 'kysely';
import type { JsonObject, ReplicaState } from '@infer/db';
import type { DeploymentState, RuntimeKind } from '@infer/shared';
import { trimTrailingSlashes } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { isUniqueViolation, notFound, ServiceError } from '../../errors.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import type { ProvisionerKind } from './provisioners/provisioner.ts';
import { recordChange } from '../snapshots/snapshots.service.ts';

export interface Deployment {
  id: string;
  tenantId: string;
  entryId: string;
  entryName: string;
  provider: string | null;
  state: DeploymentState;
  minReplicas: number;
  maxReplicas: number;
  provisioner: string;
  externalUrl: string | null;
  lastError: string | null;
  /** Null: the entry's default (see `resolveTargetConcurrency`). */
  targetConcurrency: number | null;
  scaleToZeroAfterSeconds: number;
  scaleDownDelaySeconds: number;
  desiredReplicas: number;
  lastScaleReason: string | null;
  lastScaleAt: Date | null;
  /** The entry's Concurrency multiplier, GPU Count and Cold Start TTFT (for the autoscaler and the ledger). */
  entryConcurrency: number | null;
  gpuCount: number | null;
  coldStartSeconds: number | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface Replica {
  id: string;
  deploymentId: string;
  url: string;
  kind: RuntimeKind;
  servedModel: string;
  state: ReplicaState;
  pid: number | null;
  port: number | null;
  readyAt: Date | null;
  drainStartedAt: Date | null;
  attempt: number;
  createdAt: Date;
}

const replicaColumns = [
  'id',
  'deploymentId',
  'url',
  'kind',
  'servedModel',
  'state',
  'pid',
  'port',
  'readyAt',
  'drainStartedAt',
  'attempt',
  'createdAt',
] as const;

function selectDeployments(db: Db) {
  return db
    .selectFrom('deployments as d')
    .innerJoin('catalogEntries as e', 'e.id', 'd.entryId')
    .select([
      'd.id',
      'd.tenantId',
      'd.entryId',
      'e.name as entryName',
      'e.provider',
      'd.state',
      'd.minReplicas',
      'd.maxReplicas',
      'd.provisioner',
      'd.externalUrl',
      'd.lastError',
      'd.targetConcurrency',
      'd.scaleToZeroAfterSeconds',
      'd.scaleDownDelaySeconds',
      'd.desiredReplicas',
      'd.lastScaleReason',
      'd.lastScaleAt',
      'e.concurrency as entryConcurrency',
      'e.gpuCount',
      'e.coldStartSeconds',
      'd.createdAt',
      'd.updatedAt',
    ]);
}

async function loadDeployment(db: Db, id: string): Promise<Deployment> {
  const row = await selectDeployments(db).where('d.id', '=', id).executeTakeFirst();
  if (!row) throw notFound('deployment');
  return row;
}

/** Autoscaling knobs as stored; `deployments.service.ts` validates them (one home for the rules). */
export interface AutoscalingSettings {
  readonly targetConcurrency: number | null;
  readonly scaleToZeroAfterSeconds: number;
  readonly scaleDownDelaySeconds: number;
}

export interface CreateDeploymentInput {
  readonly tenantId: string;
  readonly entryName: string;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly provisioner: ProvisionerKind;
  readonly externalUrl?: string | null;
  readonly autoscaling?: Partial<AutoscalingSettings>;
  /** Refuse entries not published (a tenant's deploy; platform admins may deploy an entry before publishing it). */
  readonly onlyPublished?: boolean;
  readonly actor?: Actor;
}

/**
 * Deploys a catalog entry as a tenant's dedicated endpoint (state 'pending', desired = minReplicas).
 * Rows only: the service validates input first (the table's checks are the last line).
 */
export async function createDeployment(db: Db, input: CreateDeploymentInput): Promise<Deployment> {
  const { minReplicas, maxReplicas } = input;
  if (!isUuid(input.tenantId)) throw notFound('tenant');
  try {
    return await withTransaction(db, async (trx) => {
      const entry = await trx
        .selectFrom('catalogEntries')
        .select(['id', 'offeredDedicated', 'published'])
        .where('name', '=', input.entryName)
        .executeTakeFirst();
      // An entry not yet published is hidden as if it did not exist (no probing its name), except where allowed.
      if (!entry || (input.onlyPublished === true && !entry.published))
        throw new ServiceError('not_found', `catalog entry ${input.entryName} not found`, 'entryName');
      if (!entry.offeredDedicated) {
        throw new ServiceError('invalid', `${input.entryName} is offered on the shared surface only`, 'entryName');
      }
      const tenant = await trx.selectFrom('tenants').select('id').where('id', '=', input.tenantId).executeTakeFirst();
      if (!tenant) throw notFound('tenant');
      const { id } = await trx
        .insertInto('deployments')
        .values({
          tenantId: input.tenantId,
          entryId: entry.id,
          state: 'pending',
          minReplicas,
          maxReplicas,
          desiredReplicas: minReplicas,
          targetConcurrency: input.autoscaling?.targetConcurrency ?? null,
          ...(input.autoscaling?.scaleToZeroAfterSeconds === undefined ? {} : { scaleToZeroAfterSeconds: input.autoscaling.scaleToZeroAfterSeconds }),
          ...(input.autoscaling?.scaleDownDelaySeconds === undefined ? {} : { scaleDownDelaySeconds: input.autoscaling.scaleDownDelaySeconds }),
          provisioner: input.provisioner,
          externalUrl: input.externalUrl ?? null,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await recordChange(trx, 'deployment', id);
      await writeAudit(trx, {
        actor: input.actor,
        tenantId: input.tenantId,
        action: 'deployment.create',
        targetType: 'deployment',
        targetId: id,
        detail: { entryName: input.entryName, minReplicas, maxReplicas, provisioner: input.provisioner },
      });
      return loadDeployment(trx, id);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ServiceError('conflict', `the tenant already has a deployment of ${input.entryName}`, 'entryName');
    throw err;
  }
}

export interface SetDeploymentStateInput {
  readonly deploymentId: string;
  readonly state: DeploymentState;
  readonly lastError?: string | null;
  readonly actor?: Actor;
}

/** After a deployment row changed: publish it to the data plane, audit it, and return its new form. */
async function publishDeploymentChange(
  trx: Db,
  row: { id: string; tenantId: string },
  audit: { actor: Actor | undefined; action: string; detail: JsonObject },
): Promise<Deployment> {
  await recordChange(trx, 'deployment', row.id);
  await writeAudit(trx, { actor: audit.actor, tenantId: row.tenantId, action: audit.action, targetType: 'deployment', targetId: row.id, detail: audit.detail });
  return loadDeployment(trx, row.id);
}

/** Moves a deployment to a new state (the provisioner drives this). */
export async function setDeploymentState(db: Db, input: SetDeploymentStateInput): Promise<Deployment> {
  if (!isUuid(input.deploymentId)) throw notFound('deployment');
  return withTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('deployments')
      .set({
        state: input.state,
        lastError: input.lastError ?? (input.state === 'failed' ? sql<string>`last_error` : null),
        updatedAt: sql<Date>`now()`,
      })
      .where('id', '=', input.deploymentId)
      .returning(['id', 'tenantId'])
      .executeTakeFirst();
    if (!row) throw notFound('deployment');
    return publishDeploymentChange(trx, row, { actor: input.actor, action: 'deployment.state', detail: { state: input.state } });
  });
}

export interface RegisterReplicaInput {
  readonly deploymentId: string;
  readonly url: string;
  readonly kind: RuntimeKind;
  readonly servedModel: string;
  readonly state?: ReplicaState;
  readonly pid?: number | null;
  readonly port?: number | null;
}

/** Records a runtime replica of a deployment; only 'ready' replicas receive traffic. */
export async function registerReplica(db: Db, input: RegisterReplicaInput): Promise<Replica> {
  if (!isUuid(input.deploymentId)) throw notFound('deployment');
  return withTransaction(db, async (trx) => {
    const d = await trx.selectFrom('deployments').select('id').where('id', '=', input.deploymentId).executeTakeFirst();
    if (!d) throw notFound('deployment');
    const replica = await trx
      .insertInto('deploymentReplicas')
      .values({
        deploymentId: input.deploymentId,
        url: trimTrailingSlashes(input.url),
        kind: input.kind,
        servedModel: input.servedModel,
        state: input.state ?? 'starting',
        pid: input.pid ?? null,
        port: input.port ?? null,
      })
      .returning(replicaColumns)
      .executeTakeFirstOrThrow();
    await recordChange(trx, 'deployment', input.deploymentId);
    return replica;
  });
}

/** Changes a replica's state (e.g. starting -> ready once its health check passes). */
export async function setReplicaState(db: Db, replicaId: string, state: ReplicaState): Promise<Replica> {
  if (!isUuid(replicaId)) throw notFound('replica');
  return withTransaction(db, async (trx) => {
    const replica = await trx.updateTable('deploymentReplicas').set({ state }).where('id', '=', replicaId).returning(replicaColumns).executeTakeFirst();
    if (!replica) throw notFound('replica');
    await recordChange(trx, 'deployment', replica.deploymentId);
    return replica;
  });
}

export async function removeReplica(db: Db, replicaId: string): Promise<void> {
  if (!isUuid(replicaId)) throw notFound('replica');
  await withTransaction(db, async (trx) => {
    const row = await trx.deleteFrom('deploymentReplicas').where('id', '=', replicaId).returning('deploymentId').executeTakeFirst();
    if (!row) throw notFound('replica');
    await recordChange(trx, 'deployment', row.deploymentId);
  });
}

/** Deletes a tenant's deployment row (scoped: another tenant's is "not found"); replicas cascade. */
export async function deleteDeploymentRow(db: Db, input: { tenantId: string; deploymentId: string; actor?: Actor }): Promise<void> {
  if (!isUuid(input.deploymentId) || !isUuid(input.tenantId)) throw notFound('deployment');
  await withTransaction(db, async (trx) => {
    const row = await trx
      .deleteFrom('deployments')
      .where('id', '=', input.deploymentId)
      .where('tenantId', '=', input.tenantId)
      .returning('id')
      .executeTakeFirst();
    if (!row) throw notFound('deployment');
    await recordChange(trx, 'deployment', row.id);
    await writeAudit(trx, {
      actor: input.actor,
      tenantId: input.tenantId,
      action: 'deployment.delete',
      targetType: 'deployment',
      targetId: row.id,
    });
  });
}

export async function listTenantDeployments(db: Db, tenantId: string): Promise<Deployment[]> {
  if (!isUuid(tenantId)) return [];
  return selectDeployments(db).where('d.tenantId', '=', tenantId).orderBy('d.createdAt').execute();
}

/** A tenant's deployment (scoped by tenant), or null. */
export async function findTenantDeployment(db: Db, tenantId: string, deploymentId: string): Promise<Deployment | null> {
  if (!isUuid(deploymentId) || !isUuid(tenantId)) return null;
  return (await selectDeployments(db).where('d.id', '=', deploymentId).where('d.tenantId', '=', tenantId).executeTakeFirst()) ?? null;
}

export async function listReplicas(db: Db, deploymentId: string): Promise<Replica[]> {
  if (!isUuid(deploymentId)) return [];
  return db.selectFrom('deploymentReplicas').select(replicaColumns).where('deploymentId', '=', deploymentId).orderBy('createdAt').execute();
}

/** The replicas of each of `deploymentIds`, oldest first, in one query; a deployment without any is absent. */
export async function listReplicasOf(db: Db, deploymentIds: readonly string[]): Promise<Map<string, Replica[]>> {
  const ids = deploymentIds.filter(isUuid);
  const out = new Map<string, Replica[]>();
  if (ids.length === 0) return out;
  const rows = await db.selectFrom('deploymentReplicas').select(replicaColumns).where('deploymentId', 'in', ids).orderBy('createdAt').execute();
  for (const r of rows) {
    const list = out.get(r.deploymentId);
    if (list) list.push(r);
    else out.set(r.deploymentId, [r]);
  }
  return out;
}

/** A deployment by id (no tenant scope: the reconciler's view), or null. */
export async function findDeploymentById(db: Db, deploymentId: string): Promise<Deployment | null> {
  if (!isUuid(deploymentId)) return null;
  return (await selectDeployments(db).where('d.id', '=', deploymentId).executeTakeFirst()) ?? null;
}

/** What a provisioner needs besides the deployment: the entry's cold start and the model name runtimes serve. */
export interface DeploymentRuntimeInfo {
  readonly coldStartSeconds: number | null;
  readonly contextLength: number | null;
  /** The entry's shared upstream served name if it has one, else the catalog Name. */
  readonly servedModel: string;
}

export async function findRuntimeInfo(db: Db, entryId: string): Promise<DeploymentRuntimeInfo | null> {
  const entry = await db.selectFrom('catalogEntries').select(['name', 'coldStartSeconds', 'contextLength']).where('id', '=', entryId).executeTakeFirst();
  if (!entry) return null;
  const upstream = await db
    .selectFrom('endpointUpstreams')
    .select('servedModel')
    .where('entryId', '=', entryId)
    .orderBy('createdAt')
    .orderBy('id')
    .executeTakeFirst();
  return { coldStartSeconds: entry.coldStartSeconds, contextLength: entry.contextLength, servedModel: upstream?.servedModel ?? entry.name };
}

/** Ids of deployments that should converge to their desired replicas (see SERVING_STATES). */
export async function listActiveDeploymentIds(db: Db): Promise<string[]> {
  const rows = await db
    .selectFrom('deployments')
    .select('id')
    .where('state', 'in', [...SERVING_STATES])
    .orderBy('createdAt')
    .execute();
  return rows.map((r) => r.id);
}

/** Every serving deployment with its settings (the autoscaler's view). */
export async function listServingDeployments(db: Db): Promise<Deployment[]> {
  return selectDeployments(db)
    .where('d.state', 'in', [...SERVING_STATES])
    .orderBy('d.createdAt')
    .execute();
}

export interface TransitionInput {
  readonly deploymentId: string;
  /** The states the move is valid from; a deployment in another state is left alone. */
  readonly from: readonly DeploymentState[];
  readonly to: DeploymentState;
  readonly lastError?: string | null;
  readonly actor?: Actor;
  /**
   * A user's stop or start also resets the desired count (stop: 0; start: `minReplicas`, as a new deployment)
   * and records why in `lastScaleReason`, so a start does not bring back the replicas of an old load.
   */
  readonly desired?: { readonly to: 'zero' | 'min'; readonly reason: string };
}

/**
 * Moves a deployment to `to` only if it is still in one of `from` (a compare-and-set, so a background
 * reconcile never overwrites a user's stop). Returns the updated deployment, or null when it was not moved.
 */
export async function transitionDeployment(db: Db, input: TransitionInput): Promise<Deployment | null> {
  if (!isUuid(input.deploymentId) || input.from.length === 0) return null;
  return withTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('deployments')
      .set({
        state: input.to,
        // A failure says why; a fresh start forgets the old reason; other moves keep it visible.
        lastError:
          input.to === 'failed'
            ? (input.lastError ?? 'failed')
            : input.lastError !== undefined
              ? input.lastError
              : input.to === 'provisioning'
                ? null
                : sql<string | null>`last_error`,
        // Column references in SET read the row as it was before this update.
        ...(input.desired === undefined
          ? {}
          : input.desired.to === 'zero'
            ? { desiredReplicas: 0, lastScaleReason: sql<string>`desired_replicas || ${` -> 0: ${input.desired.reason}`}`, lastScaleAt: sql<Date>`now()` }
            : {
                desiredReplicas: sql<number>`min_replicas`,
                lastScaleReason: sql<string>`desired_replicas || ' -> ' || min_replicas || ${`: ${input.desired.reason}`}`,
                lastScaleAt: sql<Date>`now()`,
              }),
        updatedAt: sql<Date>`now()`,
      })
      .where('id', '=', input.deploymentId)
      .where('state', 'in', [...input.from])
      .returning(['id', 'tenantId'])
      .executeTakeFirst();
    if (!row) return null;
    const detail: JsonObject = input.to === 'failed' ? { state: input.to, error: (input.lastError ?? 'failed').slice(0, 500) } : { state: input.to };
    return publishDeploymentChange(trx, row, { actor: input.actor, action: 'deployment.state', detail });
  });
}

/**
 * Sets a deployment's replica bounds and autoscaling knobs; the desired count moves into the new
 * bounds at once (the reconciler acts on it), the autoscaler takes it from there.
 */
export async function updateDeploymentScale(
  db: Db,
  input: { deploymentId: string; minReplicas: number; maxReplicas: number; autoscaling?: Partial<AutoscalingSettings>; actor?: Actor },
): Promise<Deployment> {
  if (!isUuid(input.deploymentId)) throw notFound('deployment');
  const a = input.autoscaling ?? {};
  return withTransaction(db, async (trx) => {
    const before = await trx.selectFrom('deployments').select(['desiredReplicas', 'state']).where('id', '=', input.deploymentId).forUpdate().executeTakeFirst();
    if (!before) throw notFound('deployment');
    // The desired count moves into the new bounds; on a deployment that is not halted a move is a scaling decision like the
    // autoscaler's: its reason and time are recorded, and a deployment at zero given a replica is scaling from then on
    // (as a wake makes it). A stopped or failed one keeps its count: nothing was decided, and a start begins at the
    // new minReplicas.
    const halted = before.state === 'stopped' || before.state === 'failed';
    const desired = !halted ? Math.min(Math.max(before.desiredReplicas, input.minReplicas), input.maxReplicas) : before.desiredReplicas;
    const moved = desired !== before.desiredReplicas;
    const wakes = moved && before.state === 'scaled_to_zero' && desired > 0;
    const row = await trx
      .updateTable('deployments')
      .set({
        minReplicas: input.minReplicas,
        maxReplicas: input.maxReplicas,
        desiredReplicas: desired,
        ...(moved
          ? {
              lastScaleReason: `${before.desiredReplicas} -> ${desired}: replicas bounded to ${input.minReplicas}..${input.maxReplicas}`,
              lastScaleAt: sql<Date>`now()`,
              ...(wakes ? { state: 'scaling' as const } : {}),
            }
          : {}),
        ...(a.targetConcurrency === undefined ? {} : { targetConcurrency: a.targetConcurrency }),
        ...(a.scaleToZeroAfterSeconds === undefined ? {} : { scaleToZeroAfterSeconds: a.scaleToZeroAfterSeconds }),
        ...(a.scaleDownDelaySeconds === undefined ? {} : { scaleDownDelaySeconds: a.scaleDownDelaySeconds }),
        updatedAt: sql<Date>`now()`,
      })
      .where('id', '=', input.deploymentId)
      .returning(['id', 'tenantId'])
      .executeTakeFirst();
    if (!row) throw notFound('deployment');
    // The state moved too: audited as every other state change is.
    if (wakes)
      await writeAudit(trx, {
        actor: input.actor,
        tenantId: row.tenantId,
        action: 'deployment.state',
        targetType: 'deployment',
        targetId: row.id,
        detail: { state: 'scaling', from: 'scaled_to_zero' },
      });
    const detail: JsonObject = { minReplicas: input.minReplicas, maxReplicas: input.maxReplicas };
    for (const [k, v] of Object.entries(a)) if (v !== undefined) detail[k] = v;
    return publishDeploymentChange(trx, row, { actor: input.actor, action: 'deployment.scale', detail });
  });
}

export interface ScaleDecisionInput {
  readonly deploymentId: string;
  readonly desiredReplicas: number;
  readonly reason: string;
  /** Set the state in the same step (only from these states). */
  readonly state?: { readonly from: readonly DeploymentState[]; readonly to: DeploymentState };
  readonly actor?: Actor;
}

/**
 * Records a scaling decision (autoscaler or wake): desired count, reason and time; published to the
 * data plane. Only deployments that serve (provisioning, running, scaling, scaled_to_zero) change.
 * Returns null when the deployment is gone or not serving.
 */
export async function recordScaleDecision(db: Db, input: ScaleDecisionInput): Promise<Deployment | null> {
  if (!isUuid(input.deploymentId)) return null;
  return withTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('deployments')
      .set({
        desiredReplicas: input.desiredReplicas,
        lastScaleReason: input.reason.slice(0, 500),
        lastScaleAt: sql<Date>`now()`,
        updatedAt: sql<Date>`now()`,
      })
      .where('id', '=', input.deploymentId)
      .where('state', 'in', [...SERVING_STATES])
      .returning(['id', 'tenantId'])
      .executeTakeFirst();
    if (!row) return null;
    if (input.state) {
      await trx
        .updateTable('deployments')
        .set({ state: input.state.to })
        .where('id', '=', row.id)
        .where('state', 'in', [...input.state.from])
        .execute();
    }
    if (input.actor)
      return publishDeploymentChange(trx, row, { actor: input.actor, action: 'deployment.wake', detail: { desiredReplicas: input.desiredReplicas } });
    await recordChange(trx, 'deployment', row.id);
    return loadDeployment(trx, row.id);
  });
}

/** States in which a deployment should converge to its desired replica count. */
export const SERVING_STATES: readonly DeploymentState[] = Object.freeze(['provisioning', 'running', 'scaling', 'scaled_to_zero']);

/** Sets (or clears) why the deployment's replicas misbehave, without changing its state. */
export async function setDeploymentError(db: Db, deploymentId: string, lastError: string | null): Promise<void> {
  if (!isUuid(deploymentId)) return;
  await db
    .updateTable('deployments')
    .set({ lastError: lastError === null ? null : lastError.slice(0, 1000) })
    .where('id', '=', deploymentId)
    .execute();
}

/** A replica row about to be started (not routable yet): its id names the replica in the GPU-time ledger. */
export async function insertStartingReplica(
  db: Db,
  input: { deploymentId: string; kind: RuntimeKind; servedModel: string; attempt: number },
): Promise<Replica | null> {
  if (!isUuid(input.deploymentId)) return null;
  try {
    return await db
      .insertInto('deploymentReplicas')
      .values({ deploymentId: input.deploymentId, url: '', kind: input.kind, servedModel: input.servedModel, state: 'starting', attempt: input.attempt })
      .returning(replicaColumns)
      .executeTakeFirstOrThrow();
  } catch (err) {
    if ((err as { code?: string }).code === '23503') return null; // deployment deleted meanwhile
    throw err;
  }
}

/** A started replica turns ready: it joins the routing snapshot in the same transaction. Null if its row is gone. */
export async function markReplicaReady(
  db: Db,
  replicaId: string,
  started: { url: string; kind: RuntimeKind; servedModel: string; pid: number | null; port: number | null },
): Promise<Replica | null> {
  return withTransaction(db, async (trx) => {
    const replica = await trx
      .updateTable('deploymentReplicas')
      .set({
        url: trimTrailingSlashes(started.url),
        kind: started.kind,
        servedModel: started.servedModel,
        pid: started.pid,
        port: started.port,
        state: 'ready',
        readyAt: sql<Date>`now()`,
      })
      .where('id', '=', replicaId)
      .where('state', '=', 'starting')
      .returning(replicaColumns)
      .executeTakeFirst();
    if (!replica) return null;
    await recordChange(trx, 'deployment', replica.deploymentId);
    return replica;
  });
}

/** A replica leaves the routing snapshot (drain first, stop later); false when it was not ready. */
export async function markReplicaDraining(db: Db, replicaId: string): Promise<boolean> {
  return withTransaction(db, async (trx) => {
    const replica = await trx
      .updateTable('deploymentReplicas')
      .set({ state: 'draining', drainStartedAt: sql<Date>`now()` })
      .where('id', '=', replicaId)
      .where('state', '=', 'ready')
      .returning('deploymentId')
      .executeTakeFirst();
    if (!replica) return false;
    await recordChange(trx, 'deployment', replica.deploymentId);
    return true;
  });
}

/** Sets every replica of a deployment to `state` (e.g. 'stopped', so the data plane stops routing at once). */
export async function setReplicasState(db: Db, deploymentId: string, state: ReplicaState): Promise<void> {
  if (!isUuid(deploymentId)) return;
  await withTransaction(db, async (trx) => {
    await trx.updateTable('deploymentReplicas').set({ state }).where('deploymentId', '=', deploymentId).execute();
    await recordChange(trx, 'deployment', deploymentId);
  });
}
