import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { createDeployment } from '../src/modules/deployments/deployment-store.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../src/modules/deployments/deployments-context.ts';
import { createExternalProvisioner } from '../src/modules/deployments/provisioners/external/external-provisioner.ts';
import { selectDeploymentForms } from '../src/modules/snapshots/snapshot-forms.ts';
import { createContextInner } from '../src/trpc/context.ts';
import { createCallerFactory } from '../src/trpc/init.ts';
import { appRouter } from '../src/trpc/root.ts';
import { buildWorld, principalOf, PUBLIC_URLS, type PartyName, type World } from './trpc-fixtures.ts';

const callerFactory = createCallerFactory(appRouter);

// The console's deployment page lists a deployment's cold starts: its tenant's members read them, another tenant gets not-found.
describe.each(testBackends())('deployments.coldStarts and catalog.observedColdStart (%s)', (kind) => {
  let database: TestDatabase;
  let world: World;
  let deployments: DeploymentsContext;
  const caller = async (party: PartyName) =>
    callerFactory(
      await createContextInner({ db: database.db, publicUrls: PUBLIC_URLS, deployments, principal: await principalOf(database.db, world.parties[party]) }),
    );

  beforeAll(async () => {
    database = await createTestDb(kind);
    world = await buildWorld(database.db);
    deployments = createDeploymentsContext({
      db: database.db,
      provisioners: { external: createExternalProvisioner({ timeoutMs: 200 }) },
      allowPrivateExternalUrls: true,
    });
  }, 120_000);
  afterAll(async () => {
    await deployments?.reconciler.close();
    await database?.close();
  });

  /** A catalog entry stating a 30 s cold start, deployed by tenant A on an external runtime (never started here). */
  const deployEntry = async (name: string) => {
    const entry = await createEntry(database.db, { name, provider: 'acme', offeredDedicated: true, published: true, coldStartSeconds: 30 });
    const d = await createDeployment(database.db, {
      tenantId: world.tenantA.id,
      entryName: entry.name,
      minReplicas: 0,
      maxReplicas: 1,
      provisioner: 'external',
      externalUrl: 'http://127.0.0.1:9',
    });
    return { entry, d };
  };

  it('lists the newest samples first for the owning tenant only, with the entry p50/p95', async () => {
    const { db } = database;
    const { entry, d } = await deployEntry(`cold-${kind}`);
    const t0 = Date.now() - 60_000;
    await db
      .insertInto('coldStarts')
      .values(
        [1000, 2000, 3000].map((ms, i) => ({
          deploymentId: d.id,
          entryId: entry.id,
          nodeId: 'n1',
          waitMs: ms,
          ttftMs: ms + 100,
          recordedAt: new Date(t0 + i * 1000),
        })),
      )
      .execute();

    const member = await caller('memberA');
    const got = await member.deployments.coldStarts({ tenantId: world.tenantA.id, deploymentId: d.id });
    expect(got.recent.map((r) => r.ttftMs)).toEqual([3100, 2100, 1100]);
    expect(got.entry).toEqual({ samples: 3, p50Seconds: 2.1, p95Seconds: 3.1 });
    expect(got.statedSeconds).toBe(30);
    expect(await (await caller('anonymous')).catalog.observedColdStart({ id: entry.id })).toEqual({ samples: 3, p50Seconds: 2.1, p95Seconds: 3.1 });

    const b = await caller('ownerB');
    for (const tenantId of [world.tenantB.id, world.tenantA.id]) {
      const err = await b.deployments.coldStarts({ tenantId, deploymentId: d.id }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TRPCError);
      expect((err as TRPCError).code).toBe('NOT_FOUND');
    }
  });

  it("publishes the entry's measured cold start (p95 of its last 100 samples, from 3 on) in each deployment's form", async () => {
    const { db } = database;
    const { entry, d } = await deployEntry(`measured-${kind}`);
    const form = async () => (await selectDeploymentForms(db, [d.id]))[0]!;
    const sample = (ttftMs: number, at: number) => ({
      deploymentId: d.id,
      entryId: entry.id,
      nodeId: 'n1',
      waitMs: ttftMs - 50,
      ttftMs,
      recordedAt: new Date(at),
    });
    expect(await form()).toMatchObject({ coldStartSeconds: 30, measuredColdStartSeconds: null });
    const t0 = Date.now() - 3_600_000;
    // Two samples are not enough to plan with.
    await db
      .insertInto('coldStarts')
      .values([sample(4000, t0), sample(5000, t0 + 1)])
      .execute();
    expect((await form()).measuredColdStartSeconds).toBeNull();
    // 120 slow samples: the measured figure follows them.
    await db
      .insertInto('coldStarts')
      .values(Array.from({ length: 120 }, (_, i) => sample(90_000, t0 + 10 + i)))
      .execute();
    expect((await form()).measuredColdStartSeconds).toBe(90);
    await db
      .insertInto('coldStarts')
      .values(Array.from({ length: 100 }, (_, i) => sample(1000 + i * 10, t0 + 1000 + i)))
      .execute();
    // The newest 100 are 1.00-1.99 s: p95 is the 95th of them.
    expect((await form()).measuredColdStartSeconds).toBe(1.94);
  });
});
