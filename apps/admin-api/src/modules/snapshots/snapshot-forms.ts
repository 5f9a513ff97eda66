import type { RuntimeKind, SnapshotDeployment, SnapshotEndpoint, SnapshotKey, SnapshotTenant, SnapshotUpstream } from '@infer/shared';
import type { Db } from '../../db.ts';
import { liveCredential } from '../access/credential-input.ts';
import { measuredColdStarts } from '../deployments/node-load.ts';
import { resolveTargetConcurrency } from '../deployments/target-concurrency.ts';

// Loaders of the data-plane forms of each routing entity. `ids` narrows to some rows; without it,
// every row. Arrays come back ordered by creation so snapshots are stable.

export async function selectTenantForms(db: Db, ids?: readonly string[]): Promise<SnapshotTenant[]> {
  if (ids?.length === 0) return [];
  let q = db.selectFrom('tenants').select(['id', 'slug', 'rpmLimit', 'tpmLimit']).orderBy('createdAt').orderBy('id');
  if (ids) q = q.where('id', 'in', ids);
  return q.execute();
}

/** Usable keys only: revoked and already expired keys are absent (a 'delete' for the data plane). */
export async function selectKeyForms(db: Db, ids?: readonly string[]): Promise<SnapshotKey[]> {
  if (ids?.length === 0) return [];
  let q = db
    .selectFrom('apiKeys')
    .select(['id', 'tenantId', 'hash', 'prefix', 'expiresAt', 'rpmLimit', 'tpmLimit'])
    .where(liveCredential)
    .orderBy('createdAt')
    .orderBy('id');
  if (ids) q = q.where('id', 'in', ids);
  const rows = await q.execute();
  return rows.map((r) => ({ ...r, expiresAt: r.expiresAt ? new Date(r.expiresAt).toISOString() : null }));
}

export async function selectEndpointForms(db: Db, ids?: readonly string[]): Promise<SnapshotEndpoint[]> {
  if (ids?.length === 0) return [];
  let q = db
    .selectFrom('catalogEntries')
    .select([
      'id',
      'name',
      'provider',
      'contextLength',
      'concurrency',
      'coldStartSeconds',
      'offeredShared',
      'offeredDedicated',
      'published',
      'priceInputPerM',
      'priceOutputPerM',
      'createdAt',
    ])
    .orderBy('createdAt')
    .orderBy('id');
  if (ids) q = q.where('id', 'in', ids);
  const entries = await q.execute();
  if (entries.length === 0) return [];
  const upstreams = await db
    .selectFrom('endpointUpstreams')
    .select(['id', 'entryId', 'url', 'kind', 'servedModel', 'apiKey'])
    .where(
      'entryId',
      'in',
      entries.map((e) => e.id),
    )
    .where('weight', '>', 0)
    .orderBy('createdAt')
    .orderBy('id')
    .execute();
  const byEntry = groupBy(upstreams, (u) => u.entryId);
  return entries.map(({ createdAt, ...e }) => ({
    ...e,
    createdAt: new Date(createdAt).toISOString(),
    upstreams: (byEntry.get(e.id) ?? []).map(({ id, url, kind, servedModel, apiKey }) => ({ id, url, kind, servedModel, apiKey })),
  }));
}

/** Deployments in any state, each with only its ready replicas (a draining replica has left already). */
export async function selectDeploymentForms(db: Db, ids?: readonly string[]): Promise<SnapshotDeployment[]> {
  if (ids?.length === 0) return [];
  let q = db
    .selectFrom('deployments as d')
    .innerJoin('tenants as t', 't.id', 'd.tenantId')
    .innerJoin('catalogEntries as e', 'e.id', 'd.entryId')
    .select([
      'd.id',
      'd.tenantId',
      't.slug as tenantSlug',
      'd.entryId as endpointId',
      'e.name as endpointName',
      'e.provider',
      'd.state',
      'd.provisioner',
      'd.minReplicas',
      'd.maxReplicas',
      'd.targetConcurrency',
      'e.concurrency as entryConcurrency',
      'd.desiredReplicas',
      'e.coldStartSeconds',
    ])
    .orderBy('d.createdAt')
    .orderBy('d.id');
  if (ids) q = q.where('d.id', 'in', ids);
  const deployments = await q.execute();
  if (deployments.length === 0) return [];
  const replicas = await db
    .selectFrom('deploymentReplicas')
    .select(['id', 'deploymentId', 'url', 'kind', 'servedModel'])
    .where(
      'deploymentId',
      'in',
      deployments.map((d) => d.id),
    )
    .where('state', '=', 'ready')
    .orderBy('createdAt')
    .orderBy('id')
    .execute();
  const byDeployment = groupBy(replicas, (r) => r.deploymentId);
  const measured = await measuredColdStarts(
    db,
    deployments.map((d) => d.endpointId),
  );
  return deployments.map(({ provisioner, entryConcurrency, ...d }) => ({
    ...d,
    measuredColdStartSeconds: measured.get(d.endpointId) ?? null,
    targetConcurrency: resolveTargetConcurrency({ targetConcurrency: d.targetConcurrency, entryConcurrency }),
    replicas: (byDeployment.get(d.id) ?? []).map(({ id, url, kind, servedModel }): SnapshotUpstream => ({
      id,
      url,
      kind: kind as RuntimeKind,
      servedModel,
      apiKey: null,
      // A tenant gave an external runtime's address: nodes dial it only through their address guard.
      ...(provisioner === 'external' ? { addressPolicy: 'public' as const } : {}),
    })),
  }));
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}
