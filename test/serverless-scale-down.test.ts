// Issue 10: scale-down under steady load fails no request. The real control plane (autoscaler, local
// provisioner spawning runtime-sim processes, drain) and a real data-plane node reporting its load:
// load rises until four replicas run, falls to one replica's worth, and the deployment drains back to
// one replica while clients keep sending.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp, createApiKey, createDefaultProvisioners, createEntry, createTenant, createUser } from '@infer/admin-api';
import { buildDataplaneApp, createConfigClient, createConfigStore, type ConfigClient, type ConfigStore } from '@infer/dataplane';
import type { FastifyInstance } from 'fastify';
import { addMember } from '../apps/admin-api/src/modules/tenants/tenants.service.ts';
import type { Principal } from '../apps/admin-api/src/modules/access/principal.ts';
import {
  deleteDeployment,
  deployEndpoint,
  getDeployment,
  scaleDeployment,
  startDeployment,
  stopDeployment,
} from '../apps/admin-api/src/modules/deployments/deployments.service.ts';
import { createNodeChannel } from '../apps/dataplane/src/scale/node-channel.ts';

const NODE_TOKEN = 'serverless-scale-down-node-token-0123';

async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('scale-down under steady load (control plane, data plane and runtime processes)', () => {
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
  /** Ready replicas in each snapshot the node applied, in order. */
  const replicaCounts: number[] = [];
  const replicaUrls = new Set<string>();

  beforeAll(async () => {
    database = await createTestDb('pglite');
    const { db } = database;
    const tenant = await createTenant(db, { slug: 'steady', name: 'Steady' });
    tenantId = tenant.id;
    const user = await createUser(db, { email: 'alice@steady.example', password: 'password-123' });
    await addMember(db, { tenantId, userId: user.id, role: 'owner' });
    alice = { kind: 'user', userId: user.id, email: user.email, isPlatformAdmin: false, memberships: new Map([[tenantId, 'owner']]), sessionId: 's' };
    await createEntry(db, { name: 'Steady-8B', provider: 'acme', coldStartSeconds: 1, concurrency: 1, gpuCount: 1, offeredDedicated: true, published: true });
    secret = (await createApiKey(db, { tenantId, name: 'steady' })).secret;

    admin = await buildAdminApp({
      db,
      dbKind: database.kind,
      nodeToken: NODE_TOKEN,
      publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
      provisioners: createDefaultProvisioners({ local: { ttftMs: 0, itlMs: 20, coldStartCapMs: 500 } }),
      autoscaler: { tickMs: 200, windows: { stableWindowMs: 2_000, panicWindowMs: 600, panicThreshold: 2 }, reportTtlMs: 1_500, heartbeatMs: 250 },
      replicaLifecycle: { drainGraceMs: 500, drainTimeoutMs: 20_000 },
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
      scale: { channel: createNodeChannel({ url: controlPlaneUrl, nodeToken: NODE_TOKEN, nodeId: 'steady-node' }), tickMs: 250 },
    });
    await dataplane.listen({ port: 0, host: '127.0.0.1' });
    dataplaneUrl = `http://127.0.0.1:${(dataplane.server.address() as AddressInfo).port}`;
    store.onVersion((_v, view) => {
      for (const target of view.deploymentByTenantAndName.values()) {
        if (target.deploymentId !== deploymentId) continue;
        replicaCounts.push(target.upstreams.length);
        for (const u of target.upstreams) replicaUrls.add(u.origin);
      }
    });
  }, 60_000);

  afterAll(async () => {
    if (deploymentId) await stopDeployment(admin.deployments, alice, { tenantId, deploymentId }).catch(() => undefined);
    await dataplane?.close();
    await client?.close();
    await admin?.close();
    await database?.close();
  }, 60_000);

  it('four replicas under load drain back to one while clients keep sending: zero failed requests', async () => {
    const d = await deployEndpoint(admin.deployments, alice, {
      tenantId,
      entryName: 'Steady-8B',
      minReplicas: 0,
      maxReplicas: 4,
      provisioner: 'local',
      autoscaling: { targetConcurrency: 2, scaleDownDelaySeconds: 1, scaleToZeroAfterSeconds: 60 },
    });
    deploymentId = d.id;
    await waitFor(() => store.snapshot()?.deployments.some((x) => x.id === deploymentId) === true, 'the deployment in the node snapshot');

    const url = `${dataplaneUrl}/funccall/steady/endpoints/Steady-8B/v1/chat/completions`;
    const failures: string[] = [];
    let ok = 0;
    let clients = 8;
    const loop = async (i: number) => {
      while (i < clients) {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
          body: JSON.stringify({ messages: [{ role: 'user', content: `steady ${i}` }], max_tokens: 12 }),
        });
        const text = await res.text();
        if (res.status === 200) ok++;
        else failures.push(`${res.status} ${text.slice(0, 200)}`);
      }
    };
    const loops = Array.from({ length: 8 }, (_, i) => loop(i));
    const ready = async () => (await getDeployment(admin.deployments, alice, { tenantId, deploymentId })).readyReplicas;

    await waitFor(async () => (await ready()) === 4, 'four ready replicas under load');
    // Load falls to what one replica carries (2 clients, target 2): the deployment drains to one.
    clients = 2;
    await waitFor(async () => {
      const now = await getDeployment(admin.deployments, alice, { tenantId, deploymentId });
      return now.desiredReplicas === 1 && now.replicas.length === 1 && now.readyReplicas === 1;
    }, 'back to one replica');
    const okBeforeStop = ok;
    await new Promise((r) => setTimeout(r, 1000));
    clients = 0;
    await Promise.all(loops);

    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(okBeforeStop);
    expect(Math.max(...replicaCounts)).toBe(4);
    expect(replicaCounts.at(-1)).toBe(1);
    expect(replicaUrls.size).toBeGreaterThanOrEqual(4);
    const final = await getDeployment(admin.deployments, alice, { tenantId, deploymentId });
    expect(final.lastScaleReason).toMatch(/down at most halfway/);
  }, 180_000);

  /** One stream and one JSON request (the replica's two slots), both under way at the runtime when `end` runs. */
  async function cutMidAnswer(end: () => Promise<unknown>): Promise<void> {
    const url = `${dataplaneUrl}/funccall/steady/endpoints/Steady-8B/v1/chat/completions`;
    const send = (stream: boolean) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'a long answer' }], max_tokens: 400, stream }),
      });
    const streamed = await send(true);
    expect(streamed.status).toBe(200);
    const reader = streamed.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    const json = send(false);
    await waitFor(() => dataplane.inFlightNow() === 2, 'both requests in flight');
    await end();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
    const events = text.split('\n').filter((l) => l.startsWith('data: {"error"'));
    expect(events).toHaveLength(1);
    expect(JSON.parse(events[0]!.slice(6))).toMatchObject({ error: { code: 'deployment_stopped' } });
    const answer = await json;
    expect(answer.status).toBe(503);
    expect(answer.headers.get('x-should-retry')).toBe('false');
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('deployment_stopped');
  }

  it('a stop under running requests answers each deployment_stopped (x-should-retry: false), not a retryable upstream error', async () => {
    expect(deploymentId).not.toBe('');
    await cutMidAnswer(() => stopDeployment(admin.deployments, alice, { tenantId, deploymentId }));
    // And the runtime did go: the stop is not left waiting on requests.
    await waitFor(async () => (await getDeployment(admin.deployments, alice, { tenantId, deploymentId })).replicas.length === 0, 'the replica stopped');
  }, 60_000);

  it('so does a deletion under running requests', async () => {
    const ref = { tenantId, deploymentId };
    await startDeployment(admin.deployments, alice, ref);
    await scaleDeployment(admin.deployments, alice, { ...ref, minReplicas: 1, maxReplicas: 1 });
    const routed = () => [...(store.view?.deploymentByTenantAndName.values() ?? [])].find((t) => t.deploymentId === deploymentId && t.upstreams.length > 0);
    await waitFor(() => routed() !== undefined, 'a routed replica');
    const runtime = routed()!.upstreams[0]!.origin;
    await cutMidAnswer(() => deleteDeployment(admin.deployments, alice, ref));
    deploymentId = '';
    await admin.deployments.reconciler.settled();
    // The runtime went after the answers: the deletion did not leave it running.
    expect(
      await fetch(`${runtime}/health`).then(
        () => true,
        () => false,
      ),
    ).toBe(false);
  }, 60_000);
});
