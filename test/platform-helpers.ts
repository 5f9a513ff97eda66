import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { DatabaseKind } from '@infer/db';
import { createTestDb, type TestDatabase } from '@infer/db/testing';
import { addUpstream, buildAdminApp, createApiKey, createDeployment, createEntry, createTenant, registerReplica, setDeploymentState } from '@infer/admin-api';
import {
  buildDataplaneApp,
  createConfigClient,
  createConfigStore,
  createUsageReporter,
  type ConfigClient,
  type ConfigStore,
  type UsageReporter,
} from '@infer/dataplane';
import { createRuntimeSim, type RuntimeSim } from '@infer/runtime-sim';

export const NODE_TOKEN = 'platform-test-node-token-0123456789';

/** A control plane on a real database, a runtime simulator and a data-plane node, all on real sockets. */
export interface Platform {
  database: TestDatabase;
  sim: RuntimeSim;
  admin: FastifyInstance;
  adminPort: number;
  dataplane: FastifyInstance;
  dataplaneUrl: string;
  store: ConfigStore;
  client: ConfigClient;
  reporter: UsageReporter;
  tenantId: string;
  secret: string;
  keyId: string;
  startAdmin(): Promise<void>;
  stopAdmin(): Promise<void>;
  close(): Promise<void>;
}

async function listenAdmin(database: TestDatabase, port: number): Promise<FastifyInstance> {
  const admin = await buildAdminApp({
    db: database.db,
    dbKind: database.kind,
    pgPool: database.pool,
    nodeToken: NODE_TOKEN,
    publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
  });
  await admin.listen({ port, host: '127.0.0.1' });
  return admin;
}

export async function startPlatform(kind: DatabaseKind, opts: { usageFlushMs?: number } = {}): Promise<Platform> {
  const database = await createTestDb(kind);
  const sim = createRuntimeSim({ models: ['org/served-model', 'org/dedicated-served'] });
  const simUrl = (await sim.listen(0)).url;

  const tenant = await createTenant(database.db, { slug: 'acme', name: 'Acme' });
  const entry = await createEntry(database.db, {
    name: 'Model-One',
    provider: 'org',
    offeredShared: true,
    offeredDedicated: true,
    published: true,
    contextLength: 8192,
    priceInputPerM: 1,
    priceOutputPerM: 2,
  });
  await addUpstream(database.db, { entryId: entry.id, url: simUrl, kind: 'sim', servedModel: 'org/served-model' });
  const deployment = await createDeployment(database.db, {
    tenantId: tenant.id,
    entryName: 'Model-One',
    minReplicas: 1,
    maxReplicas: 1,
    provisioner: 'external',
    externalUrl: simUrl,
  });
  await registerReplica(database.db, { deploymentId: deployment.id, url: simUrl, kind: 'sim', servedModel: 'org/dedicated-served', state: 'ready' });
  await setDeploymentState(database.db, { deploymentId: deployment.id, state: 'running' });
  const created = await createApiKey(database.db, { tenantId: tenant.id, name: 'platform test' });

  let admin: FastifyInstance | null = await listenAdmin(database, 0);
  const adminPort = (admin.server.address() as AddressInfo).port;
  const controlPlaneUrl = `http://127.0.0.1:${adminPort}`;

  const store = createConfigStore();
  const reporter = createUsageReporter({ url: controlPlaneUrl, nodeToken: NODE_TOKEN, flushMs: opts.usageFlushMs ?? 100 });
  const client = createConfigClient({ url: controlPlaneUrl, nodeToken: NODE_TOKEN, store, minBackoffMs: 50, maxBackoffMs: 200 });
  client.start();
  // The external deployment above runs on loopback (the simulator): the node allow-lists it as an operator would.
  const dataplane = buildDataplaneApp({ store, usage: reporter, allowedPrivateCidrs: ['127.0.0.0/8', '::1/128'] });
  await dataplane.listen({ port: 0, host: '127.0.0.1' });
  const dataplaneUrl = `http://127.0.0.1:${(dataplane.server.address() as AddressInfo).port}`;
  const deadline = Date.now() + 5000;
  while (store.version === 0 || !store.view) {
    if (Date.now() > deadline) throw new Error('data plane never received a snapshot');
    await new Promise((r) => setTimeout(r, 20));
  }

  return {
    database,
    sim,
    get admin() {
      return admin!;
    },
    adminPort,
    dataplane,
    dataplaneUrl,
    store,
    client,
    reporter,
    tenantId: tenant.id,
    secret: created.secret,
    keyId: created.key.id,
    async startAdmin() {
      admin = await listenAdmin(database, adminPort);
    },
    async stopAdmin() {
      await admin?.close();
      admin = null;
    },
    async close() {
      await dataplane.close();
      await client.close();
      await reporter.close();
      await admin?.close();
      await sim.close();
      await database.close();
    },
  };
}

/** One non-streamed shared chat call; returns the status. */
export async function chat(p: Platform, secret: string, extra: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${p.dataplaneUrl}/endpoints/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'Model-One', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 8, ...extra }),
  });
}

export async function waitFor<T>(fn: () => Promise<T | undefined | false>, timeoutMs: number, stepMs = 10): Promise<{ value: T; elapsedMs: number }> {
  const start = performance.now();
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== false) return { value, elapsedMs: performance.now() - start };
    if (performance.now() - start > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
