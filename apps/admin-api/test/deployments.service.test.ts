import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { ServiceError } from '../src/errors.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import {
  createDeployment,
  deleteDeploymentRow as deleteDeployment,
  registerReplica,
  setDeploymentState,
  setReplicaState,
  updateDeploymentScale,
} from '../src/modules/deployments/deployment-store.ts';
import { buildSnapshot, readDeltasAfter } from '../src/modules/snapshots/snapshots.service.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';

describe.each(testBackends())('deployments service (%s)', (kind) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDb(kind);
  });
  afterAll(async () => database?.close());

  it('runs a deployment through its states with outbox rows and audit entries', async () => {
    const { db } = database;
    const tenant = await createTenant(db, { slug: 'dep', name: 'Dep' });
    const other = await createTenant(db, { slug: 'dep-other', name: 'Other' });
    await createEntry(db, { name: 'Shared-Only-7B', provider: 'x', offeredShared: true, offeredDedicated: false });
    await createEntry(db, { name: 'Both-8B', provider: 'acme', offeredDedicated: true });

    const refused = await createDeployment(db, {
      tenantId: tenant.id,
      entryName: 'Shared-Only-7B',
      minReplicas: 1,
      maxReplicas: 1,
      provisioner: 'local',
    }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).code).toBe('invalid');
    await expect(
      createDeployment(db, { tenantId: tenant.id, entryName: 'Missing', minReplicas: 1, maxReplicas: 1, provisioner: 'local' }),
    ).rejects.toMatchObject({ code: 'not_found' });

    const before = (await buildSnapshot(db)).version;
    const d = await createDeployment(db, { tenantId: tenant.id, entryName: 'Both-8B', minReplicas: 0, maxReplicas: 2, provisioner: 'local' });
    expect(d).toMatchObject({ state: 'pending', entryName: 'Both-8B', provider: 'acme' });
    await expect(
      createDeployment(db, { tenantId: tenant.id, entryName: 'Both-8B', minReplicas: 0, maxReplicas: 2, provisioner: 'local' }),
    ).rejects.toMatchObject({ code: 'conflict' });

    await setDeploymentState(db, { deploymentId: d.id, state: 'provisioning' });
    const replica = await registerReplica(db, { deploymentId: d.id, url: 'http://127.0.0.1:1234/', kind: 'sim', servedModel: 'acme/Both-8B' });
    expect((await buildSnapshot(db)).deployments.find((x) => x.id === d.id)?.replicas).toEqual([]);
    await setReplicaState(db, replica.id, 'ready');
    await setDeploymentState(db, { deploymentId: d.id, state: 'running' });
    const snap = (await buildSnapshot(db)).deployments.find((x) => x.id === d.id);
    expect(snap).toMatchObject({ state: 'running', tenantSlug: 'dep', endpointName: 'Both-8B' });
    expect(snap?.replicas).toEqual([{ id: replica.id, url: 'http://127.0.0.1:1234', kind: 'sim', servedModel: 'acme/Both-8B', apiKey: null }]);

    await expect(deleteDeployment(db, { tenantId: other.id, deploymentId: d.id })).rejects.toMatchObject({ code: 'not_found' });
    await deleteDeployment(db, { tenantId: tenant.id, deploymentId: d.id });
    const deltas = (await readDeltasAfter(db, before)).filter((x) => x.id === d.id);
    expect(deltas.map((x) => x.op)).toEqual(['upsert', 'upsert', 'upsert', 'upsert', 'upsert', 'delete']);
    const audit = await db.selectFrom('auditLog').select('action').where('targetId', '=', d.id).orderBy('id').execute();
    expect(audit.map((a) => a.action)).toEqual(['deployment.create', 'deployment.state', 'deployment.state', 'deployment.delete']);
  });

  it('new replica bounds: a decision on a serving deployment (a wake from zero audited as a state change), none on a stopped one', async () => {
    const { db } = database;
    const tenant = await createTenant(db, { slug: 'dep-scale', name: 'Scale' });
    await createEntry(db, { name: 'Scale-8B', provider: 'acme', offeredDedicated: true });
    const d = await createDeployment(db, { tenantId: tenant.id, entryName: 'Scale-8B', minReplicas: 0, maxReplicas: 2, provisioner: 'local' });
    await setDeploymentState(db, { deploymentId: d.id, state: 'scaled_to_zero' });
    const woken = await updateDeploymentScale(db, { deploymentId: d.id, minReplicas: 1, maxReplicas: 2 });
    expect(woken).toMatchObject({ state: 'scaling', desiredReplicas: 1, lastScaleReason: '0 -> 1: replicas bounded to 1..2' });
    const audit = await db.selectFrom('auditLog').select(['action', 'detail']).where('targetId', '=', d.id).orderBy('id').execute();
    expect(audit.slice(-2)).toEqual([
      { action: 'deployment.state', detail: { state: 'scaling', from: 'scaled_to_zero' } },
      { action: 'deployment.scale', detail: { minReplicas: 1, maxReplicas: 2 } },
    ]);

    await setDeploymentState(db, { deploymentId: d.id, state: 'stopped' });
    const stopped = await updateDeploymentScale(db, { deploymentId: d.id, minReplicas: 2, maxReplicas: 2 });
    // Bounds only: no scaling decision was taken, the count and the state stay (a start begins at minReplicas).
    expect(stopped).toMatchObject({ state: 'stopped', minReplicas: 2, desiredReplicas: 1, lastScaleReason: '0 -> 1: replicas bounded to 1..2' });
  });
});
