// Issue 10 end to end: a zero-replica deployment takes a burst of 200 concurrent requests through the real
// control plane (autoscaler, local provisioner spawning runtime-sim processes, wake and load routes) and a
// real data-plane node holding requests through the cold start.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp, createApiKey, createDefaultProvisioners, createEntry, createTenant, createUser } from '@infer/admin-api';
import { buildDataplaneApp, createConfigClient, createConfigStore, type ConfigClient, type ConfigStore } from '@infer/dataplane';
import type { FastifyInstance } from 'fastify';
import { addMember } from '../apps/admin-api/src/modules/tenants/tenants.service.ts';
import type { Principal } from '../apps/admin-api/src/modules/access/principal.ts';
import { deployEndpoint, stopDeployment } from '../apps/admin-api/src/modules/deployments/deployments.service.ts';
import { createNodeChannel } from '../apps/dataplane/src/scale/node-channel.ts';

const NODE_TOKEN = 'serverless-burst-node-token-0123456789';
const TARGET = 8;
const MAX = 4;
const BURST = 200;

async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.each(testBackends())('serverless burst from zero (control plane, data plane and runtime processes; %s)', (kind) => {
  let database: TestDatabase;
  let admin: FastifyInstance;
  let dataplane: FastifyInstance;
  let client: ConfigClient;
  let store: ConfigStore;
  let dataplaneUrl: string;
  let secret: string;
  let tenantId: string;
  let alice: Principal;
  let deploymentId = '';
  /** Most ready replicas the node ever saw at once, and every replica URL it saw. */
  let maxReplicasSeen = 0;
  const replicaUrls = new Set<string>();

  beforeAll(async () => {
    database = await createTestDb(kind);
    const { db } = database;
    const tenant = await createTenant(db, { slug: 'burst', name: 'Burst' });
    tenantId = tenant.id;
    const user = await createUser(db, { email: 'alice@burst.example', password: 'password-123' });
    await addMember(db, { tenantId, userId: user.id, role: 'owner' });
    alice = { kind: 'user', userId: user.id, email: user.email, isPlatformAdmin: false, memberships: new Map([[tenantId, 'owner']]), sessionId: 's' };
    await createEntry(db, { name: 'Burst-8B', provider: 'acme', coldStartSeconds: 1, concurrency: 1, offeredDedicated: true, published: true });
    secret = (await createApiKey(db, { tenantId, name: 'burst' })).secret;

    admin = await buildAdminApp({
      db,
      dbKind: database.kind,
      nodeToken: NODE_TOKEN,
      publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
      provisioners: createDefaultProvisioners({ local: { ttftMs: 0, itlMs: 15 } }),
      autoscaler: { tickMs: 200 },
      replicaBaseConcurrency: TARGET,
    });
    await admin.listen({ port: 0, host: '127.0.0.1' });
    const controlPlaneUrl = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;

    store = createConfigStore();
    client = createConfigClient({ url: controlPlaneUrl, nodeToken: NODE_TOKEN, store, minBackoffMs: 50, maxBackoffMs: 200 });
    client.start();
    dataplane = buildDataplaneApp({
      store,
      usage: { record() {} },
      logger: false,
      // The node's base (32 by default) differs from the deployment's targetConcurrency on purpose: the snapshot's
      // targetConcurrency is each replica's slot count, and every routing policy (the default scorer here) keeps to it.
      scale: { channel: createNodeChannel({ url: controlPlaneUrl, nodeToken: NODE_TOKEN, nodeId: 'burst-node' }), tickMs: 250 },
    });
    await dataplane.listen({ port: 0, host: '127.0.0.1' });
    dataplaneUrl = `http://127.0.0.1:${(dataplane.server.address() as AddressInfo).port}`;
    store.onVersion((_v, view) => {
      for (const target of view.deploymentByTenantAndName.values()) {
        if (target.deploymentId !== deploymentId) continue;
        maxReplicasSeen = Math.max(maxReplicasSeen, target.upstreams.length);
        for (const u of target.upstreams) replicaUrls.add(u.origin);
      }
    });
  }, 60_000);

  afterAll(async () => {
    // Each step names itself when it is slow, so that a teardown that hangs says where (it happened once in CI, under
    // a loaded machine, and not since).
    const step = async (what: string, run: () => Promise<unknown> | undefined): Promise<void> => {
      const started = Date.now();
      const slow = setInterval(() => console.error(`serverless-burst teardown: still in ${what} after ${Date.now() - started} ms`), 10_000);
      try {
        await run();
      } finally {
        clearInterval(slow);
      }
    };
    await step('stopDeployment', () =>
      deploymentId ? stopDeployment(admin.deployments, alice, { tenantId, deploymentId }).catch(() => undefined) : undefined,
    );
    await step('the data plane close', () => dataplane?.close());
    await step('the config client close', () => client?.close());
    await step('the control plane close', () => admin?.close());
    await step('the database close', () => database?.close());
  }, 120_000);

  it(`${BURST} concurrent requests against a deployment at zero (target ${TARGET}, max ${MAX}) all succeed within the replica and concurrency bounds`, async () => {
    const d = await deployEndpoint(admin.deployments, alice, {
      tenantId,
      entryName: 'Burst-8B',
      minReplicas: 0,
      maxReplicas: MAX,
      provisioner: 'local',
      autoscaling: { targetConcurrency: TARGET },
    });
    deploymentId = d.id;
    await waitFor(() => store.snapshot()?.deployments.some((x) => x.id === deploymentId) === true, 'the deployment in the node snapshot');
    expect(store.snapshot()!.deployments.find((x) => x.id === deploymentId)!.replicas).toEqual([]);

    const url = `${dataplaneUrl}/funccall/burst/endpoints/Burst-8B/v1/chat/completions`;
    // Each runtime's own figures, polled while the burst runs: a replica the control plane replaces keeps its last ones.
    const last = new Map<string, { peakInFlight: number; totals: { completed: number } }>();
    let polling = true;
    const poll = () =>
      Promise.all(
        [...replicaUrls].map(async (origin) => {
          try {
            last.set(origin, (await (await fetch(`${origin}/sim/stats`)).json()) as { peakInFlight: number; totals: { completed: number } });
          } catch {
            // gone: its last figures stand
          }
        }),
      );
    const poller = (async () => {
      while (polling) {
        await poll();
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const results = await Promise.all(
      Array.from({ length: BURST }, (_, i) =>
        fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
          body: JSON.stringify({ messages: [{ role: 'user', content: `request ${i}` }], max_tokens: 8 }),
        }).then(async (r) => ({ status: r.status, coldStart: r.headers.get('x-cold-start'), text: await r.text() })),
      ),
    );

    const failed = results.filter((r) => r.status !== 200);
    expect(failed.map((r) => `${r.status} ${r.text.slice(0, 200)}`)).toEqual([]);
    expect(results.filter((r) => r.coldStart === 'true').length).toBeGreaterThan(0);
    expect(maxReplicasSeen).toBeGreaterThanOrEqual(1);
    expect(maxReplicasSeen).toBeLessThanOrEqual(MAX);
    // The runtimes' own count: no replica ever had more than its concurrency in flight (running plus waiting).
    await new Promise((r) => setTimeout(r, 300)); // one more poll after the last answer
    polling = false;
    await poller;
    // A replica that joined as the burst ended may have had no poll yet: read every one once more.
    await poll();
    let served = 0;
    for (const origin of replicaUrls) {
      const stats = last.get(origin);
      if (stats === undefined) throw new Error(`replica ${origin} was never read (of ${[...last.keys()].join(', ')})`);
      expect(stats.peakInFlight, origin).toBeLessThanOrEqual(TARGET);
      served += stats.totals.completed;
    }
    expect(served).toBe(BURST);
  }, 120_000);
});
