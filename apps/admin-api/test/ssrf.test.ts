// SSRF through external deployments (issue 9, finding 2), performed against the control plane: literal
// and encoded internal addresses, names that resolve (or later rebind) to internal addresses, and a
// runtime that redirects its probes to an internal service.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { createAddressGuard, type AddressGuard, type ResolvedAddress } from '@infer/shared/address-guard';
import type { Principal } from '../src/modules/access/principal.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../src/modules/deployments/deployments-context.ts';
import { deleteDeployment, deployEndpoint, getDeployment } from '../src/modules/deployments/deployments.service.ts';
import { createExternalProvisioner } from '../src/modules/deployments/provisioners/external/external-provisioner.ts';
import { buildSnapshot } from '../src/modules/snapshots/snapshots.service.ts';
import { addMember, createTenant } from '../src/modules/tenants/tenants.service.ts';

interface Internal {
  readonly url: string;
  readonly port: number;
  readonly hits: () => number;
  close(): Promise<void>;
}

/** The platform's internal runtime stand-in (answers health and models), or a runtime that redirects everything. */
async function startServer(redirectTo?: string): Promise<Internal> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    hits++;
    req.resume();
    if (redirectTo !== undefined) res.writeHead(302, { location: `${redirectTo}${req.url ?? '/'}` }).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'internal-model' }] }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hits: () => hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Each name answers from its script, one answer per lookup (the last repeats): what an attacker's DNS does. */
function attackerDns(script: Record<string, string[][]>) {
  const calls = new Map<string, number>();
  return async (hostname: string): Promise<readonly ResolvedAddress[]> => {
    const answers = script[hostname];
    if (!answers) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const n = calls.get(hostname) ?? 0;
    calls.set(hostname, n + 1);
    return answers[Math.min(n, answers.length - 1)]!.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

describe.each(testBackends())('external deployment addresses (%s)', (kind) => {
  let database: TestDatabase;
  let internal: Internal;
  let tenantId: string;
  let alice: Principal;
  let admin: Principal;
  const contexts: DeploymentsContext[] = [];

  const contextWith = (guard: AddressGuard, timeoutMs = 2000): DeploymentsContext => {
    const c = createDeploymentsContext({
      db: database.db,
      provisioners: { external: createExternalProvisioner({ timeoutMs, addressGuard: guard }) },
      addressGuard: guard,
      reconciler: { startRetryBackoffMs: 0 }, // settled() covers every attempt
    });
    contexts.push(c);
    return c;
  };

  beforeAll(async () => {
    database = await createTestDb(kind);
    internal = await startServer();
    const { db } = database;
    const t = await createTenant(db, { slug: 'acme', name: 'Acme' });
    tenantId = t.id;
    const u = await createUser(db, { email: 'alice@example.com', password: 'password-123' });
    await addMember(db, { tenantId, userId: u.id, role: 'owner' });
    alice = { kind: 'user', userId: u.id, email: u.email, isPlatformAdmin: false, memberships: new Map([[tenantId, 'owner']]), sessionId: 'a' };
    admin = { kind: 'user', userId: 'root', email: 'root@example.com', isPlatformAdmin: true, memberships: new Map(), sessionId: 'r' };
    await createEntry(db, { name: 'Ext-8B', provider: 'acme', offeredDedicated: true });
  });

  afterAll(async () => {
    await Promise.all(contexts.map((c) => c.reconciler.close()));
    await internal?.close();
    await database?.close();
  });

  const deploy = (ctx: DeploymentsContext, who: Principal, externalUrl: string) =>
    deployEndpoint(ctx, who, { tenantId, entryName: 'Ext-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'external', externalUrl });

  it.each([
    'http://127.0.0.1:PORT',
    'http://2130706433:PORT',
    'http://0x7f.1:PORT',
    'http://017700000001:PORT',
    'http://127.1:PORT',
    'http://[::ffff:127.0.0.1]:PORT',
    'http://[::1]:PORT',
    'http://0.0.0.0:PORT',
    'http://169.254.169.254',
    'http://[fd00::1]',
    'http://10.1.2.3:8000',
    'http://192.168.0.10',
    'http://100.64.0.1',
    'http://localhost:PORT',
    'http://127.0.0.1.nip.io:PORT',
    'http://internal.attacker.example:PORT',
    'http://mixed.attacker.example:PORT',
  ])('refuses %s for tenants and platform admins alike', async (template) => {
    const guard = createAddressGuard({
      resolve: attackerDns({
        localhost: [['127.0.0.1']],
        '127.0.0.1.nip.io': [['127.0.0.1']],
        'internal.attacker.example': [['10.0.0.7']],
        'mixed.attacker.example': [['93.184.216.34', '169.254.169.254']],
      }),
    });
    const ctx = contextWith(guard);
    const url = template.replace('PORT', String(internal.port));
    for (const who of [alice, admin]) {
      await expect(deploy(ctx, who, url)).rejects.toMatchObject({ code: 'invalid', param: 'externalUrl', message: expect.stringMatching(/public address/) });
    }
    expect(internal.hits()).toBe(0);
  });

  it('refuses an over-long URL before any work on it (a public host, then 300,000 slashes and a letter)', async () => {
    const ctx = contextWith(createAddressGuard({ resolve: attackerDns({ 'public.example': [['93.184.216.34']] }) }));
    // Trimming the slashes with a regex took minutes of the event loop (each position retried the run).
    await expect(deploy(ctx, alice, `http://public.example/${'/'.repeat(300_000)}a`)).rejects.toMatchObject({
      code: 'invalid',
      param: 'externalUrl',
      message: 'externalUrl must be at most 2000 characters',
    });
  });

  it('resolves with the system resolver by default: localhost is refused', async () => {
    const ctx = createDeploymentsContext({ db: database.db, provisioners: { external: createExternalProvisioner() } });
    contexts.push(ctx);
    await expect(deploy(ctx, alice, `http://localhost:${internal.port}`)).rejects.toMatchObject({ code: 'invalid', param: 'externalUrl' });
  });

  it('refuses a name that rebinds to loopback after registration when the probe connects', async () => {
    // Registration sees a public address; every later lookup (the probe's) answers 127.0.0.1.
    const ctx = contextWith(createAddressGuard({ resolve: attackerDns({ 'rebind.attacker.example': [['93.184.216.34'], ['127.0.0.1']] }) }));
    const d = await deploy(ctx, alice, `http://rebind.attacker.example:${internal.port}`);
    expect(d.state).toBe('provisioning');
    await ctx.reconciler.settled(d.id);
    const after = await getDeployment(ctx, alice, { tenantId, deploymentId: d.id });
    expect(after).toMatchObject({ state: 'failed', readyReplicas: 0 });
    expect(after.lastError).toMatch(/not reachable: rebind\.attacker\.example resolves to a loopback address/);
    expect(internal.hits()).toBe(0);
    await deleteDeployment(ctx, alice, { tenantId, deploymentId: d.id });
  });

  it('never follows a probe redirect to an internal address', async () => {
    const redirector = await startServer(internal.url);
    try {
      // Even with every address allowed (an operator's development override), a 3xx is an answer, not a hop.
      const provisioner = createExternalProvisioner({ timeoutMs: 2000, addressGuard: createAddressGuard({ allowAll: true }) });
      await expect(
        provisioner.start({
          deploymentId: 'd',
          tenantId,
          entryName: 'Ext-8B',
          servedModel: 'x',
          coldStartSeconds: null,
          externalUrl: redirector.url,
        } as Parameters<typeof provisioner.start>[0]),
      ).rejects.toThrow(/answered neither/);
      expect(redirector.hits()).toBeGreaterThan(0);
      expect(internal.hits()).toBe(0);
      await provisioner.close?.();
    } finally {
      await redirector.close();
    }
  });

  it('marks external replicas in the snapshot so nodes dial them through their own guard', async () => {
    const ctx = contextWith(createAddressGuard({ allowAll: true }));
    const d = await deploy(ctx, alice, internal.url);
    await ctx.reconciler.settled(d.id);
    expect(await getDeployment(ctx, alice, { tenantId, deploymentId: d.id })).toMatchObject({ state: 'running', readyReplicas: 1 });
    const snap = (await buildSnapshot(database.db)).deployments.find((x) => x.id === d.id);
    expect(snap?.replicas).toMatchObject([{ url: internal.url, addressPolicy: 'public' }]);
    await deleteDeployment(ctx, alice, { tenantId, deploymentId: d.id });
  });
});
