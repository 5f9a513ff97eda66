// Rows of deployments and their replicas; every routing change writes a config outbox row in its transaction.
import { sql } from 'kysely';
import type { JsonObject, ReplicaState } from '@infer/db';
import type { DeploymentState, RuntimeKind } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { isUniqueViolation, notFound, ServiceError } from '../../errors.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { recordChange } from '../snapshots/snapshots.service.ts';

/** Provisioner kinds a deployment row may name (the column is open text; 'kubernetes' is future work). */
export const provisionerNames = ['local', 'kubernetes', 'external'] as const;
export type ProvisionerName = (typeof provisionerNames)[number];

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
  createdAt: Date;
}

const replicaColumns = ['id', 'deploymentId', 'url', 'kind', 'servedModel', 'state', 'pid', 'port', 'createdAt'] as const;

function selectDeployments(db: Db) {
  return db
    .selectFrom('deployments as d')
    .innerJoin('catalogEntries as e', 'e.id', 'd.entryId')
    .select([
      'd.id', 'd.tenantId', 'd.entryId', 'e.name as entryName', 'e.provider', 'd.state', 'd.minReplicas',
      'd.maxReplicas', 'd.provisioner', 'd.externalUrl', 'd.lastError', 'd.createdAt', 'd.updatedAt',
    ]);
}

async function loadDeployment(db: Db, id: string): Promise<Deployment> {
  const row = await selectDeployments(db).where('d.id', '=', id).executeTakeFirst();
  if (!row) throw notFound('deployment');
  return row;
}

export interface CreateDeploymentInput {
  readonly tenantId: string;
  readonly entryName: string;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly provisioner: ProvisionerName;
  readonly externalUrl?: string | null;
  readonly actor?: Actor;
}

/** Deploys a catalog entry as a tenant's dedicated endpoint (state 'pending'). */
export async function createDeployment(db: Db, input: CreateDeploymentInput): Promise<Deployment> {
  const { minReplicas, maxReplicas } = input;
  if (!Number.isInteger(minReplicas) || minReplicas < 0) throw new ServiceError('invalid', 'minReplicas must be an integer >= 0', 'minReplicas');
  if (!Number.isInteger(maxReplicas) || maxReplicas < Math.max(1, minReplicas)) {
    throw new ServiceError('invalid', 'maxReplicas must be an integer >= max(1, minReplicas)', 'maxReplicas');
  }
  if (!provisionerNames.includes(input.provisioner)) throw new ServiceError('invalid', `provisioner must be one of ${provisionerNames.join(', ')}`, 'provisioner');
  if (input.provisioner === 'external' && !input.externalUrl) {
    throw new ServiceError('invalid', 'externalUrl is required for the external provisioner', 'externalUrl');
  }
  if (!isUuid(input.tenantId)) throw notFound('tenant');
  try {
    return await withTransaction(db, async (trx) => {
      const entry = await trx
        .selectFrom('catalogEntries')
        .select(['id', 'offeredDedicated'])
        .where('name', '=', input.entryName)
        .executeTakeFirst();
      if (!entry) throw notFound(`catalog entry ${input.entryName}`);
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
        url: input.url.replace(/\/+$/, ''),
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
    const replica = await trx
      .updateTable('deploymentReplicas')
      .set({ state })
      .where('id', '=', replicaId)
      .returning(replicaColumns)
      .executeTakeFirst();
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

/** A deployment by id (no tenant scope: the reconciler's view), or null. */
export async function findDeploymentById(db: Db, deploymentId: string): Promise<Deployment | null> {
  if (!isUuid(deploymentId)) return null;
  return (await selectDeployments(db).where('d.id', '=', deploymentId).executeTakeFirst()) ?? null;
}

/** What a provisioner needs besides the deployment: the entry's cold start and the model name runtimes serve. */
export interface DeploymentRuntimeInfo {
  readonly coldStartSeconds: number | null;
  /** The entry's shared upstream served name if it has one, else the catalog Name. */
  readonly servedModel: string;
}

export async function findRuntimeInfo(db: Db, entryId: string): Promise<DeploymentRuntimeInfo | null> {
  const entry = await db.selectFrom('catalogEntries').select(['name', 'coldStartSeconds']).where('id', '=', entryId).executeTakeFirst();
  if (!entry) return null;
  const upstream = await db
    .selectFrom('endpointUpstreams')
    .select('servedModel')
    .where('entryId', '=', entryId)
    .orderBy('createdAt')
    .orderBy('id')
    .executeTakeFirst();
  return { coldStartSeconds: entry.coldStartSeconds, servedModel: upstream?.servedModel ?? entry.name };
}

/** Ids of deployments that should have replicas (provisioning or running). */
export async function listActiveDeploymentIds(db: Db): Promise<string[]> {
  const rows = await db.selectFrom('deployments').select('id').where('state', 'in', ['provisioning', 'running']).orderBy('createdAt').execute();
  return rows.map((r) => r.id);
}

export interface TransitionInput {
  readonly deploymentId: string;
  /** The states the move is valid from; a deployment in another state is left alone. */
  readonly from: readonly DeploymentState[];
  readonly to: DeploymentState;
  readonly lastError?: string | null;
  readonly actor?: Actor;
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
      .set({ state: input.to, lastError: input.to === 'failed' ? (input.lastError ?? 'failed') : null, updatedAt: sql<Date>`now()` })
      .where('id', '=', input.deploymentId)
      .where('state', 'in', [...input.from])
      .returning(['id', 'tenantId'])
      .executeTakeFirst();
    if (!row) return null;
    const detail: JsonObject = input.to === 'failed' ? { state: input.to, error: (input.lastError ?? 'failed').slice(0, 500) } : { state: input.to };
    return publishDeploymentChange(trx, row, { actor: input.actor, action: 'deployment.state', detail });
  });
}

/** Sets a deployment's replica bounds (the reconciler acts on them). */
export async function updateDeploymentScale(
  db: Db,
  input: { deploymentId: string; minReplicas: number; maxReplicas: number; actor?: Actor },
): Promise<Deployment> {
  if (!isUuid(input.deploymentId)) throw notFound('deployment');
  return withTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('deployments')
      .set({ minReplicas: input.minReplicas, maxReplicas: input.maxReplicas, updatedAt: sql<Date>`now()` })
      .where('id', '=', input.deploymentId)
      .returning(['id', 'tenantId'])
      .executeTakeFirst();
    if (!row) throw notFound('deployment');
    return publishDeploymentChange(trx, row, {
      actor: input.actor, action: 'deployment.scale', detail: { minReplicas: input.minReplicas, maxReplicas: input.maxReplicas },
    });
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
