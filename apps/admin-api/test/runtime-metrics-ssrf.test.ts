// SSRF through the control plane's runtime-metrics scrape (issue 9, finding 2): the autoscaler and the
// drain read each replica's /metrics. An external deployment's address is the tenant's, so its scrape
// goes through the address guard (pinned lookup, no redirects, bounded body); a redirect to an internal
// service, or a name that re-resolves to one, must reach nothing internal.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { createAddressGuard, type AddressGuard, type ResolvedAddress } from '@infer/shared/address-guard';
import type { Principal } from '../src/modules/access/principal.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { startAutoscaler } from '../src/modules/deployments/autoscaler/autoscaler.ts';
import { createSoleLeader } from '../src/modules/deployments/autoscaler/leader-election.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../src/modules/deployments/deployments-context.ts';
import { deleteDeployment, deployEndpoint } from '../src/modules/deployments/deployments.service.ts';
import { createExternalProvisioner } from '../src/modules/deployments/provisioners/external/external-provisioner.ts';
import { scrapeRuntimeLoad } from '../src/modules/deployments/runtime-metrics.ts';
import { addMember, createTenant } from '../src/modules/tenants/tenants.service.ts';

const INTERNAL_METRICS = 'vllm:num_requests_running 7\nvllm:num_requests_waiting 5\n';

interface Listener {
  readonly port: number;
  /** Requests received, by path. */
  readonly hits: string[];
  close(): Promise<void>;
}

async function listen(host: string, port: number, handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<Listener> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '/');
    req.resume();
    handle(req, res);
  });
  server.listen(port, host);
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A tenant's OpenAI-compatible runtime: healthy, one model; /metrics as `metrics` says. Closes every connection (each request dials anew). */
function tenantRuntime(metrics: () => { redirectTo: string } | { body: string }) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    res.setHeader('connection', 'close');
    if (req.url === '/metrics') {
      const m = metrics();
      if ('redirectTo' in m) res.writeHead(302, { location: m.redirectTo }).end();
      else res.writeHead(200, { 'content-type': 'text/plain' }).end(m.body);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'tenant-model' }] }));
  };
}

const internalService = (_req: IncomingMessage, res: ServerResponse): void => {
  res.writeHead(200, { 'content-type': 'text/plain' }).end(INTERNAL_METRICS);
};

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.each(testBackends())('runtime metrics of external deployments (%s)', (kind) => {
  let database: TestDatabase;
  let tenantId: string;
  let alice: Principal;
  const contexts: DeploymentsContext[] = [];

  const contextWith = (guard: AddressGuard): DeploymentsContext => {
    const c = createDeploymentsContext({
      db: database.db,
      provisioners: { external: createExternalProvisioner({ timeoutMs: 2000, addressGuard: guard }) },
      addressGuard: guard,
    });
    contexts.push(c);
    return c;
  };

  /** Deploys the external URL and waits until this process runs its one replica; returns the deployment and replica ids. */
  const deployExternal = async (ctx: DeploymentsContext, externalUrl: string): Promise<{ deploymentId: string; replicaId: string }> => {
    const d = await deployEndpoint(ctx, alice, { tenantId, entryName: 'Metrics-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'external', externalUrl });
    await ctx.reconciler.settled(d.id);
    const replica = [...ctx.reconciler.ownedReplicas().values()].find((r) => r.deploymentId === d.id);
    if (!replica) throw new Error('the external replica did not start');
    return { deploymentId: d.id, replicaId: replica.id };
  };

  beforeAll(async () => {
    database = await createTestDb(kind);
    const { db } = database;
    tenantId = (await createTenant(db, { slug: 'metrics-acme', name: 'Acme' })).id;
    const u = await createUser(db, { email: 'metrics-alice@example.com', password: 'password-123' });
    await addMember(db, { tenantId, userId: u.id, role: 'owner' });
    alice = { kind: 'user', userId: u.id, email: u.email, isPlatformAdmin: false, memberships: new Map([[tenantId, 'owner']]), sessionId: 'a' };
    await createEntry(db, { name: 'Metrics-8B', provider: 'acme', offeredDedicated: true });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(contexts.map((c) => c.reconciler.close()));
    await database?.close();
  });

  it("never follows a metrics redirect to an internal address (the autoscaler's ticks and the reconciler's reads)", async () => {
    const internal = await listen('127.0.0.1', 0, internalService);
    const runtime = await listen(
      '127.0.0.1',
      0,
      tenantRuntime(() => ({ redirectTo: `http://127.0.0.1:${internal.port}/metrics` })),
    );
    // The operator allow-lists 127.0.0.1 (where this "tenant" runtime listens): the internal service is
    // on an allowed address too, so only "a 3xx is an answer, never a hop" keeps the scrape off it.
    const ctx = contextWith(createAddressGuard({ allowedCidrs: ['127.0.0.1/32'] }));
    const autoscaler = startAutoscaler(ctx, createSoleLeader(), { tickMs: 50, sweepMs: 60_000 });
    try {
      const { deploymentId, replicaId } = await deployExternal(ctx, `http://127.0.0.1:${runtime.port}`);
      expect(await ctx.reconciler.runtimeLoad(replicaId, 1_000)).toBeNull();
      // The autoscaler scrapes every tick: wait for several scrapes of the runtime, then count the internal service's requests.
      await until('three autoscaler scrapes after the direct one', () => runtime.hits.filter((h) => h === '/metrics').length >= 4);
      await autoscaler.close();
      expect(internal.hits).toEqual([]);
      await deleteDeployment(ctx, alice, { tenantId, deploymentId });
    } finally {
      await autoscaler.close();
      await runtime.close();
      await internal.close();
    }
  });

  it('refuses a name that re-resolves to an internal address when the scrape connects', async () => {
    const runtime = await listen(
      '127.0.0.1',
      0,
      tenantRuntime(() => ({ body: 'vllm:num_requests_running 3\nvllm:num_requests_waiting 1\n' })),
    );
    // The internal service on another loopback address, same port: only the resolved address differs.
    const internal = await listen('127.0.0.2', runtime.port, internalService);
    let answer = '127.0.0.1';
    const lookups: string[] = [];
    const resolve = async (hostname: string): Promise<readonly ResolvedAddress[]> => {
      if (hostname !== 'runtime.tenant.example') throw Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      lookups.push(answer);
      return [{ address: answer, family: 4 }];
    };
    const ctx = contextWith(createAddressGuard({ allowedCidrs: ['127.0.0.1/32'], resolve }));
    try {
      const { deploymentId, replicaId } = await deployExternal(ctx, `http://runtime.tenant.example:${runtime.port}`);
      // While the name resolves to the runtime, its gauges are read through the guard.
      expect(await ctx.reconciler.runtimeLoad(replicaId, 1_000)).toEqual({ running: 3, waiting: 1, kvCacheUsage: null });

      answer = '127.0.0.2'; // DNS rebinding: the same name now points inside
      const before = lookups.length;
      expect(await ctx.reconciler.runtimeLoad(replicaId, 1_000)).toBeNull();
      expect(lookups.length).toBeGreaterThan(before); // the scrape dialled anew and the guard saw the new address
      expect(internal.hits).toEqual([]);

      // The same scrape without the guard's refusal does reach the internal service: the guard is what stopped it.
      const open = createExternalProvisioner({ timeoutMs: 2000, addressGuard: createAddressGuard({ allowAll: true, resolve }) });
      const ref = { deploymentId, url: `http://runtime.tenant.example:${runtime.port}`, pid: null, port: null };
      expect(await open.runtimeLoad?.(ref, 1_000)).toEqual({ running: 7, waiting: 5, kvCacheUsage: null });
      expect(internal.hits).toEqual(['/metrics']);
      await open.close?.();
      await deleteDeployment(ctx, alice, { tenantId, deploymentId });
    } finally {
      await runtime.close();
      await internal.close();
    }
  });

  it("the platform's own replicas are scraped without following redirects, reading a bounded body", async () => {
    const internal = await listen('127.0.0.1', 0, internalService);
    const redirector = await listen(
      '127.0.0.1',
      0,
      tenantRuntime(() => ({ redirectTo: `http://127.0.0.1:${internal.port}/metrics` })),
    );
    const huge = await listen('127.0.0.1', 0, (_req, res) => {
      // 64 MiB of comments and then the gauges: only the first MiB is read, so the gauges are never seen.
      res.writeHead(200, { 'content-type': 'text/plain' });
      const line = `# ${'x'.repeat(1022)}\n`;
      let sent = 0;
      const pump = (): void => {
        while (sent < 65_536) {
          sent++;
          if (!res.write(line)) return void res.once('drain', pump);
        }
        res.end('vllm:num_requests_running 1\n');
      };
      res.on('error', () => undefined);
      pump();
    });
    try {
      expect(await scrapeRuntimeLoad(`http://127.0.0.1:${redirector.port}`, 2_000)).toBeNull();
      expect(redirector.hits).toEqual(['/metrics']);
      expect(internal.hits).toEqual([]);
      expect(await scrapeRuntimeLoad(`http://127.0.0.1:${huge.port}`, 10_000)).toBeNull();
    } finally {
      await Promise.all([internal.close(), redirector.close(), huge.close()]);
    }
  });
});
