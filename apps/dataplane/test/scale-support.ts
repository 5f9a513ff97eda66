import { once } from 'node:events';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hashSecret, loadReportSchema, wakeRequestSchema } from '@infer/shared';
import type { ConfigSnapshot, LoadReport, SnapshotDeployment, WakeRequest } from '@infer/shared';
import { createRuntimeSim } from '@infer/runtime-sim';
import type { RuntimeSim, RuntimeSimOptions } from '@infer/runtime-sim';

export const SECRET = 'infk_test_scale_tenant_key_000000000';
export const SECRET_LIMITED = 'infk_test_scale_limited_key_00000000';
export const SERVED = 'sim-served';
export const NODE_TOKEN = 'node-token-scale-test';

/** A deployment row as the control plane publishes it (state scaled_to_zero, no replica). */
export function zeroDeployment(id: string, name: string, coldStartSeconds: number): SnapshotDeployment {
  return {
    id,
    tenantId: 't-s',
    tenantSlug: 'scaly',
    endpointId: `e-${id}`,
    endpointName: name,
    provider: 'meta',
    state: 'scaled_to_zero',
    replicas: [],
    minReplicas: 0,
    maxReplicas: 4,
    targetConcurrency: 8,
    desiredReplicas: 0,
    coldStartSeconds,
    measuredColdStartSeconds: null,
  };
}

export function scaleSnapshot(deployments: SnapshotDeployment[]): ConfigSnapshot {
  return {
    version: 1,
    tenants: [{ id: 't-s', slug: 'scaly', rpmLimit: null, tpmLimit: null }],
    keys: [
      { id: 'k-s', tenantId: 't-s', hash: hashSecret(SECRET), prefix: SECRET.slice(0, 12), expiresAt: null, rpmLimit: null, tpmLimit: null },
      { id: 'k-l', tenantId: 't-s', hash: hashSecret(SECRET_LIMITED), prefix: SECRET_LIMITED.slice(0, 12), expiresAt: null, rpmLimit: 1, tpmLimit: null },
    ],
    endpoints: deployments.map((d) => ({
      id: d.endpointId,
      name: d.endpointName,
      provider: 'meta',
      contextLength: 8192,
      concurrency: 1,
      coldStartSeconds: d.coldStartSeconds,
      offeredShared: false,
      offeredDedicated: true,
      published: true,
      priceInputPerM: 0.1,
      priceOutputPerM: 0.2,
      upstreams: [],
    })),
    deployments,
  };
}

export interface StubControlPlane {
  readonly url: string;
  readonly wakes: WakeRequest[];
  readonly reports: LoadReport[];
  readonly authHeaders: Set<string>;
  /** Replicas started by wakes (and by `addReplica`), per deployment. */
  readonly sims: Map<string, RuntimeSim[]>;
  /** When set, a wake boots this many replicas with these options, then publishes them once warm. */
  autoWake: { replicas: number; sim: RuntimeSimOptions } | null;
  /** Publishes a deployment's new row as a delta on the config stream. */
  publish(d: SnapshotDeployment): void;
  /** Publishes a deployment's delete as a delta on the config stream. */
  remove(id: string): void;
  deployment(id: string): SnapshotDeployment;
  /** Boots `n` runtime-sims for a deployment (state `scaling` meanwhile), publishing them once warm. */
  boot(id: string, n: number, sim: RuntimeSimOptions): Promise<void>;
  /** Stops a deployment's replicas and publishes it at zero. */
  toZero(id: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * A real HTTP server standing in for the control plane: the config stream (snapshot, then deltas, as the
 * real one sends them), the wake route (boots runtime-sim replicas when `autoWake` is set) and the load route.
 */
export async function startStubControlPlane(initial: ConfigSnapshot): Promise<StubControlPlane> {
  let snapshot = structuredClone(initial);
  const streams = new Set<ServerResponse>();
  const wakes: WakeRequest[] = [];
  const reports: LoadReport[] = [];
  const authHeaders = new Set<string>();
  const sims = new Map<string, RuntimeSim[]>();
  const booting = new Set<string>();

  const publish = (d: SnapshotDeployment): void => {
    const version = snapshot.version + 1;
    snapshot = { ...snapshot, version, deployments: snapshot.deployments.map((x) => (x.id === d.id ? d : x)) };
    const delta = { version, kind: 'deployment', id: d.id, op: 'upsert', value: d };
    for (const s of streams) s.write(`id: ${version}\nevent: delta\ndata: ${JSON.stringify(delta)}\n\n`);
  };
  const remove = (id: string): void => {
    const version = snapshot.version + 1;
    snapshot = { ...snapshot, version, deployments: snapshot.deployments.filter((x) => x.id !== id) };
    const delta = { version, kind: 'deployment', id, op: 'delete', value: null };
    for (const s of streams) s.write(`id: ${version}\nevent: delta\ndata: ${JSON.stringify(delta)}\n\n`);
  };
  const deployment = (id: string): SnapshotDeployment => snapshot.deployments.find((d) => d.id === id)!;

  const boot = async (id: string, n: number, opts: RuntimeSimOptions): Promise<void> => {
    booting.add(id);
    const before = deployment(id).replicas;
    publish({ ...deployment(id), state: 'scaling', desiredReplicas: before.length + n });
    const started = await Promise.all(
      Array.from({ length: n }, async () => {
        const sim = createRuntimeSim({ models: [SERVED], ...opts });
        const { url } = await sim.listen(0);
        return { sim, url };
      }),
    );
    sims.set(id, [...(sims.get(id) ?? []), ...started.map((s) => s.sim)]);
    await Promise.all(started.map((s) => s.sim.whenWarm()));
    const replicas = [
      ...deployment(id).replicas,
      ...started.map((s, i) => ({ id: `${id}-r${before.length + i}`, url: s.url, kind: 'sim' as const, servedModel: SERVED, apiKey: null })),
    ];
    publish({ ...deployment(id), state: 'running', desiredReplicas: replicas.length, replicas });
    booting.delete(id);
  };

  const stub: StubControlPlane = {
    url: '',
    wakes,
    reports,
    authHeaders,
    sims,
    autoWake: null,
    publish,
    remove,
    deployment,
    boot,
    async toZero(id) {
      publish({ ...deployment(id), state: 'scaled_to_zero', desiredReplicas: 0, replicas: [] });
      for (const sim of sims.get(id) ?? []) await sim.close();
      sims.delete(id);
    },
    close: async () => {
      for (const s of streams) s.end();
      for (const list of sims.values()) for (const sim of list) await sim.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    authHeaders.add(req.headers.authorization ?? '');
    if (req.headers.authorization !== `Bearer ${NODE_TOKEN}`) {
      res.writeHead(401).end();
      return;
    }
    if (req.method === 'GET' && req.url === '/internal/v1/config/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(`id: ${snapshot.version}\nevent: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`);
      streams.add(res);
      res.on('close', () => streams.delete(res));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      if (req.method === 'POST' && req.url === '/internal/v1/wake') {
        const w = wakeRequestSchema.parse(body);
        wakes.push(w);
        const auto = stub.autoWake;
        if (auto !== null && !booting.has(w.deploymentId) && deployment(w.deploymentId).replicas.length === 0) {
          void boot(w.deploymentId, auto.replicas, auto.sim);
        }
        res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ state: deployment(w.deploymentId).state }));
        return;
      }
      if (req.method === 'POST' && req.url === '/internal/v1/load') {
        reports.push(loadReportSchema.parse(body));
        res.writeHead(204).end();
        return;
      }
      res.writeHead(404).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  (stub as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return stub;
}
