import { sql } from 'kysely';
import type { ReplicaState } from '@infer/db';
import type { DeploymentState, RuntimeKind } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { isUniqueViolation, notFound, ServiceError } from '../../errors.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { recordChange } from '../snapshots/snapshots.service.ts';

export const provisioners = ['local', 'kubernetes', 'external'] as const;
export type Provisioner = (typeof provisioners)[number];

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
  readonly provisioner: Provisioner;
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
  if (!provisioners.includes(input.provisioner)) throw new ServiceError('invalid', `provisioner must be one of ${provisioners.join(', ')}`, 'provisioner');
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
    await recordChange(trx, 'deployment', row.id);
    await writeAudit(trx, {
      actor: input.actor,
      tenantId: row.tenantId,
      action: 'deployment.state',
      targetType: 'deployment',
      targetId: row.id,
      detail: { state: input.state },
    });
    return loadDeployment(trx, row.id);
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

/** Deletes a tenant's deployment (scoped: another tenant's is "not found"). */
export async function deleteDeployment(db: Db, input: { tenantId: string; deploymentId: string; actor?: Actor }): Promise<void> {
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

export async function listDeployments(db: Db, tenantId: string): Promise<Deployment[]> {
  if (!isUuid(tenantId)) return [];
  return selectDeployments(db).where('d.tenantId', '=', tenantId).orderBy('d.createdAt').execute();
}

/** A tenant's deployment (scoped by tenant), or null. */
export async function getDeployment(db: Db, tenantId: string, deploymentId: string): Promise<Deployment | null> {
  if (!isUuid(deploymentId) || !isUuid(tenantId)) return null;
  return (await selectDeployments(db).where('d.id', '=', deploymentId).where('d.tenantId', '=', tenantId).executeTakeFirst()) ?? null;
}

export async function listReplicas(db: Db, deploymentId: string): Promise<Replica[]> {
  if (!isUuid(deploymentId)) return [];
  return db.selectFrom('deploymentReplicas').select(replicaColumns).where('deploymentId', '=', deploymentId).orderBy('createdAt').execute();
}
