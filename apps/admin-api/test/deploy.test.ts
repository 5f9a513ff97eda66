import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { createRuntimeSim, type RuntimeSim } from '@infer/runtime-sim';
import { createAddressGuard } from '@infer/shared/address-guard';
import type { Principal } from '../src/modules/access/principal.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { addUpstream, createEntry, setPublished } from '../src/modules/catalog/catalog.service.ts';
import { createDefaultProvisioners, createDeploymentsContext, type DeploymentsContext } from '../src/modules/deployments/deployments-context.ts';
import {
  deleteDeployment,
  deployEndpoint,
  getDeployment,
  listDeployments,
  listReplicas,
  scaleDeployment,
  startDeployment,
  stopDeployment,
} from '../src/modules/deployments/deployments.service.ts';
import { createExternalProvisioner } from '../src/modules/deployments/provisioners/external/external-provisioner.ts';
import { createLocalProvisioner } from '../src/modules/deployments/provisioners/local/local-provisioner.ts';
import { buildSnapshot, readDeltasAfter } from '../src/modules/snapshots/snapshots.service.ts';
import { addMember, createTenant } from '../src/modules/tenants/tenants.service.ts';
import { until } from './k8s-fake/fake-cluster.ts';

const SERVED = 'acme/ded-8b';

async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return true;
  } catch {
    return false;
  }
}

async function chat(url: string, model: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 3 }),
  });
}

describe.each(testBackends())('dedicated deployments with provisioners (%s)', (kind) => {
  let database: TestDatabase;
  let ctx: DeploymentsContext;
  const contexts: DeploymentsContext[] = [];
  let tenantA: string;
  let tenantB: string;
  let alice: Principal; // member of A
  let bob: Principal; // owner of B
  let deploymentId: string;

  const newContext = (provisioners = createDefaultProvisioners({ local: { ttftMs: 0, itlMs: 0 } }), allowPrivateExternalUrls = false) => {
    // Failed starts are retried at once here (settled() then covers every attempt); the backoff has its own test.
    const c = createDeploymentsContext({ db: database.db, provisioners, allowPrivateExternalUrls, reconciler: { startRetryBackoffMs: 0 } });
    contexts.push(c);
    return c;
  };
  const snapshotOf = async (id: string) => (await buildSnapshot(database.db)).deployments.find((d) => d.id === id);

  beforeAll(async () => {
    database = await createTestDb(kind);
    const { db } = database;
    const a = await createTenant(db, { slug: 'acme', name: 'Acme' });
    const b = await createTenant(db, { slug: 'bravo', name: 'Bravo' });
    tenantA = a.id;
    tenantB = b.id;
    const ua = await createUser(db, { email: 'alice@example.com', password: 'password-123' });
    const ub = await createUser(db, { email: 'bob@example.com', password: 'password-123' });
    await addMember(db, { tenantId: a.id, userId: ua.id, role: 'member' });
    await addMember(db, { tenantId: b.id, userId: ub.id, role: 'owner' });
    alice = { kind: 'user', userId: ua.id, email: ua.email, isPlatformAdmin: false, memberships: new Map([[a.id, 'member']]), sessionId: 'a' };
    bob = { kind: 'user', userId: ub.id, email: ub.email, isPlatformAdmin: false, memberships: new Map([[b.id, 'owner']]), sessionId: 'b' };
    const entry = await createEntry(db, { name: 'Ded-8B', provider: 'acme', coldStartSeconds: 1, offeredShared: true, offeredDedicated: true });
    await addUpstream(db, { entryId: entry.id, kind: 'sim', url: 'http://127.0.0.1:9', servedModel: SERVED });
    await createEntry(db, { name: 'Ext-8B', provider: 'acme', offeredDedicated: true });
    await createEntry(db, { name: 'Broken-8B', provider: 'acme', offeredDedicated: true });
    await createEntry(db, { name: 'Shared-7B', provider: 'acme', offeredShared: true, offeredDedicated: false });
    ctx = newContext();
  });

  afterAll(async () => {
    await Promise.all(contexts.map((c) => c.reconciler.close()));
    await database?.close();
  });

  it('refuses bad requests', async () => {
    const base = { tenantId: tenantA, minReplicas: 1, maxReplicas: 1, provisioner: 'local' as const };
    await expect(deployEndpoint(ctx, alice, { ...base, entryName: 'Shared-7B' })).rejects.toMatchObject({ code: 'invalid', param: 'entryName' });
    // An entry the platform has not published cannot be deployed by a tenant, and is refused as if it did not exist.
    const hidden = await createEntry(database.db, { name: 'Hidden-8B', provider: 'acme', offeredDedicated: true });
    await setPublished(database.db, hidden.id, false);
    const missing = await deployEndpoint(ctx, alice, { ...base, entryName: 'No-Such-8B' }).catch((e: unknown) => e);
    const refusedHidden = await deployEndpoint(ctx, alice, { ...base, entryName: 'Hidden-8B' }).catch((e: unknown) => e);
    expect(refusedHidden).toMatchObject({ code: 'not_found', param: 'entryName', message: 'catalog entry Hidden-8B not found' });
    expect(missing).toMatchObject({ code: 'not_found', message: 'catalog entry No-Such-8B not found' });
    await expect(deployEndpoint(ctx, alice, { ...base, entryName: 'Ded-8B', minReplicas: 3, maxReplicas: 2 })).rejects.toMatchObject({ code: 'invalid' });
    await expect(deployEndpoint(ctx, alice, { ...base, entryName: 'Ded-8B', maxReplicas: 9 })).rejects.toMatchObject({ code: 'invalid', param: 'maxReplicas' });
    await expect(deployEndpoint(ctx, alice, { ...base, entryName: 'Ext-8B', provisioner: 'external' })).rejects.toMatchObject({
      code: 'invalid',
      param: 'externalUrl',
    });
    await expect(
      deployEndpoint(ctx, alice, { ...base, entryName: 'Ext-8B', provisioner: 'external', externalUrl: 'http://127.0.0.1:4000' }),
    ).rejects.toMatchObject({ code: 'invalid', param: 'externalUrl' });
    // A runtime URL with another provisioner is refused, not dropped (simulated replicas started in its place).
    await expect(deployEndpoint(ctx, alice, { ...base, entryName: 'Ext-8B', externalUrl: 'https://gpu.example.com' })).rejects.toMatchObject({
      code: 'invalid',
      param: 'externalUrl',
      message: expect.stringMatching(/only for the external provisioner/),
    });
    await expect(deployEndpoint(ctx, bob, { ...base, entryName: 'Ded-8B' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(deployEndpoint(ctx, { kind: 'anonymous' }, { ...base, entryName: 'Ded-8B' })).rejects.toMatchObject({ code: 'unauthenticated' });
    expect(await listDeployments(ctx, alice, tenantA)).toEqual([]);
  });

  it('deploys with the local provisioner: provisioning -> running, a ready replica in the snapshot', async () => {
    const before = (await buildSnapshot(database.db)).version;
    const d = await deployEndpoint(ctx, alice, { tenantId: tenantA, entryName: 'Ded-8B', minReplicas: 1, maxReplicas: 2, provisioner: 'local' });
    deploymentId = d.id;
    expect(d).toMatchObject({ state: 'provisioning', entryName: 'Ded-8B', minReplicas: 1, maxReplicas: 2 });
    await ctx.reconciler.settled(d.id);

    const running = await getDeployment(ctx, alice, { tenantId: tenantA, deploymentId: d.id });
    expect(running).toMatchObject({ state: 'running', readyReplicas: 1, lastError: null });
    const [replica] = await listReplicas(database.db, d.id);
    expect(replica).toMatchObject({ state: 'ready', kind: 'sim', servedModel: SERVED });
    expect(replica?.pid).toBeGreaterThan(0);
    const res = await chat(replica!.url, SERVED);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);

    expect(await snapshotOf(d.id)).toMatchObject({
      state: 'running',
      tenantSlug: 'acme',
      endpointName: 'Ded-8B',
      replicas: [{ url: replica!.url, servedModel: SERVED }],
    });
    const deltas = (await readDeltasAfter(database.db, before)).filter((x) => x.kind === 'deployment' && x.id === d.id);
    const last = deltas.at(-1);
    expect(last?.value).toMatchObject({ state: 'running', replicas: [{ url: replica!.url }] });
  });

  it('scales 1 -> 2 -> 1', async () => {
    const ref = { tenantId: tenantA, deploymentId };
    const up = await scaleDeployment(ctx, alice, { ...ref, minReplicas: 2, maxReplicas: 2 });
    // A move of the desired count is a scaling decision: its reason and time are recorded.
    expect(up).toMatchObject({ desiredReplicas: 2, lastScaleReason: '1 -> 2: replicas bounded to 2..2' });
    expect(up.lastScaleAt).not.toBeNull();
    await ctx.reconciler.settled(deploymentId);
    const two = await listReplicas(database.db, deploymentId);
    expect(two.map((r) => r.state)).toEqual(['ready', 'ready']);
    expect(new Set(two.map((r) => r.url)).size).toBe(2);
    expect((await snapshotOf(deploymentId))?.replicas).toHaveLength(2);

    // A lower maximum brings the desired count down at once (otherwise the autoscaler decides, see autoscaler tests).
    const scaled = await scaleDeployment(ctx, alice, { ...ref, minReplicas: 1, maxReplicas: 1 });
    expect(scaled).toMatchObject({ minReplicas: 1, maxReplicas: 1, desiredReplicas: 1, lastScaleReason: '2 -> 1: replicas bounded to 1..1' });
    // Bounds that keep the count: no new decision.
    const kept = await scaleDeployment(ctx, alice, { ...ref, minReplicas: 1, maxReplicas: 3 });
    expect(kept).toMatchObject({ desiredReplicas: 1, lastScaleReason: '2 -> 1: replicas bounded to 1..1' });
    await ctx.reconciler.settled(deploymentId);
    const one = await listReplicas(database.db, deploymentId);
    expect(one).toHaveLength(1);
    expect(one[0]?.id).toBe(two[0]?.id); // the newest goes first
    expect(await answers(two[1]!.url)).toBe(false);
    await expect(scaleDeployment(ctx, alice, { ...ref, minReplicas: 1, maxReplicas: 20 })).rejects.toMatchObject({ code: 'invalid' });
  });

  it("keeps tenant B away from tenant A's deployment", async () => {
    const asB = { tenantId: tenantB, deploymentId };
    await expect(scaleDeployment(ctx, bob, { ...asB, minReplicas: 0, maxReplicas: 1 })).rejects.toMatchObject({ code: 'not_found' });
    await expect(stopDeployment(ctx, bob, asB)).rejects.toMatchObject({ code: 'not_found' });
    await expect(deleteDeployment(ctx, bob, asB)).rejects.toMatchObject({ code: 'not_found' });
    await expect(getDeployment(ctx, bob, asB)).rejects.toMatchObject({ code: 'not_found' });
    await expect(stopDeployment(ctx, bob, { tenantId: tenantA, deploymentId })).rejects.toMatchObject({ code: 'not_found' });
    expect(await listDeployments(ctx, bob, tenantB)).toEqual([]);
    expect((await getDeployment(ctx, alice, { tenantId: tenantA, deploymentId })).state).toBe('running');
  });

  it('stops (no ready replica routed at once, processes gone) and starts again', async () => {
    const ref = { tenantId: tenantA, deploymentId };
    const [old] = await listReplicas(database.db, deploymentId);
    const stoppedAt = Date.now();
    const stopped = await stopDeployment(ctx, alice, ref);
    expect(stopped).toMatchObject({ state: 'stopped', desiredReplicas: 0, lastScaleReason: '1 -> 0: stopped' });
    expect(await snapshotOf(deploymentId)).toMatchObject({ state: 'stopped', replicas: [] });
    await ctx.reconciler.settled(deploymentId);
    // The runtime outlived the stop by the drain grace (1 s by default), so the nodes had the stop before it went and
    // a request it cut was answered deployment_stopped (test/serverless-scale-down.test.ts).
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(950);
    expect(await listReplicas(database.db, deploymentId)).toEqual([]);
    expect(await answers(old!.url)).toBe(false);
    await expect(stopDeployment(ctx, alice, ref)).rejects.toMatchObject({ code: 'invalid' });
    await expect(scaleDeployment(ctx, alice, { ...ref, minReplicas: 1, maxReplicas: 1 })).resolves.toMatchObject({
      state: 'stopped',
      maxReplicas: 1,
      desiredReplicas: 0,
    });
    expect(await listReplicas(database.db, deploymentId)).toEqual([]);

    // A start begins at minReplicas, as a new deployment does (not at the count of the load before the stop).
    expect(await startDeployment(ctx, alice, ref)).toMatchObject({
      state: 'provisioning',
      desiredReplicas: 1,
      lastScaleReason: '0 -> 1: started at minReplicas',
    });
    await expect(startDeployment(ctx, alice, ref)).rejects.toMatchObject({ code: 'invalid' });
    await ctx.reconciler.settled(deploymentId);
    expect(await getDeployment(ctx, alice, ref)).toMatchObject({ state: 'running', readyReplicas: 1 });
  });

  it('restarts local replicas of an earlier control plane on new ports', async () => {
    const [old] = await listReplicas(database.db, deploymentId);
    const next = newContext(); // a second control plane process: it owns none of the recorded replicas
    await next.reconciler.reconcileAll();
    await next.reconciler.settled(deploymentId);
    const [fresh] = await listReplicas(database.db, deploymentId);
    expect(fresh?.id).not.toBe(old?.id);
    expect(fresh?.port).not.toBe(old?.port);
    expect((await chat(fresh!.url, SERVED)).status).toBe(200);
    expect((await snapshotOf(deploymentId))?.replicas.map((r) => r.url)).toEqual([fresh!.url]);
    await ctx.reconciler.close(); // the "old process" shuts down: its replica goes with it
    expect(await answers(old!.url)).toBe(false);
    ctx = next;
  });

  it('replaces a replica that dies on its own', async () => {
    const [dead] = await listReplicas(database.db, deploymentId);
    process.kill(dead!.pid!, 'SIGKILL');
    const deadline = Date.now() + 15_000;
    let replicas = await listReplicas(database.db, deploymentId);
    while ((replicas[0]?.id === dead!.id || replicas.length === 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      await ctx.reconciler.settled(deploymentId);
      replicas = await listReplicas(database.db, deploymentId);
    }
    expect(replicas).toHaveLength(1);
    expect(replicas[0]?.id).not.toBe(dead!.id);
    expect((await chat(replicas[0]!.url, SERVED)).status).toBe(200);
  });

  it('deletes: the replica process is killed and the route is gone', async () => {
    const [replica] = await listReplicas(database.db, deploymentId);
    expect(await answers(replica!.url)).toBe(true);
    const deletedAt = Date.now();
    await deleteDeployment(ctx, alice, { tenantId: tenantA, deploymentId });
    expect(await snapshotOf(deploymentId)).toBeUndefined();
    // As after a stop, the runtime outlives the deletion by the drain grace (the nodes have it before the runtime goes),
    // even when the periodic sweep runs meanwhile (it stopped replicas whose rows were gone at once).
    const sweep = ctx.reconciler.reconcileAll();
    while (await answers(replica!.url)) await new Promise((r) => setTimeout(r, 20));
    expect(Date.now() - deletedAt).toBeGreaterThanOrEqual(950);
    await sweep;
    await ctx.reconciler.settled(deploymentId);
    expect(await answers(replica!.url)).toBe(false);
    await expect(getDeployment(ctx, alice, { tenantId: tenantA, deploymentId })).rejects.toMatchObject({ code: 'not_found' });
    await expect(scaleDeployment(ctx, alice, { tenantId: tenantA, deploymentId, minReplicas: 1, maxReplicas: 1 })).rejects.toMatchObject({ code: 'not_found' });
  });

  it('a raised minimum at zero is a recorded decision: the deployment is scaling at once, then running', async () => {
    const d = await deployEndpoint(ctx, alice, { tenantId: tenantA, entryName: 'Ded-8B', minReplicas: 0, maxReplicas: 1, provisioner: 'local' });
    const ref = { tenantId: tenantA, deploymentId: d.id };
    await ctx.reconciler.settled(d.id);
    expect(await getDeployment(ctx, alice, ref)).toMatchObject({ state: 'scaled_to_zero', desiredReplicas: 0 });
    const up = await scaleDeployment(ctx, alice, { ...ref, minReplicas: 1, maxReplicas: 1 });
    expect(up).toMatchObject({ state: 'scaling', desiredReplicas: 1, lastScaleReason: '0 -> 1: replicas bounded to 1..1' });
    await ctx.reconciler.settled(d.id);
    expect(await getDeployment(ctx, alice, ref)).toMatchObject({ state: 'running', readyReplicas: 1 });
    await deleteDeployment(ctx, alice, ref);
  });

  it('registers an external runtime URL', async () => {
    const sim: RuntimeSim = createRuntimeSim({ models: ['acme/ext-8b'] });
    const { url } = await sim.listen(0);
    try {
      // The operator's override for loopback runtimes: registration and the probes both allow every address.
      const trusting = newContext({ external: createExternalProvisioner({ timeoutMs: 2000, addressGuard: createAddressGuard({ allowAll: true }) }) }, true);
      const d = await deployEndpoint(trusting, alice, {
        tenantId: tenantA,
        entryName: 'Ext-8B',
        minReplicas: 1,
        maxReplicas: 1,
        provisioner: 'external',
        externalUrl: `${url}/v1/`,
      });
      expect(d).toMatchObject({ state: 'provisioning', externalUrl: url, provisioner: 'external' });
      await trusting.reconciler.settled(d.id);
      expect(await getDeployment(trusting, alice, { tenantId: tenantA, deploymentId: d.id })).toMatchObject({ state: 'running', readyReplicas: 1 });
      expect(await snapshotOf(d.id)).toMatchObject({ replicas: [{ url, kind: 'openai', servedModel: 'acme/ext-8b' }] });
      await deleteDeployment(trusting, alice, { tenantId: tenantA, deploymentId: d.id });
      expect(await answers(url)).toBe(true); // not ours to stop
    } finally {
      await sim.close();
    }
  });

  it('replaces a replica not ready by its start deadline (bounded retries) and reports why', async () => {
    // A runtime that says it listens but never becomes healthy.
    const hang = [process.execPath, '-e', 'console.log("listening on http://127.0.0.1:9"); setInterval(() => {}, 1000)', '--'];
    const slow = createDeploymentsContext({
      db: database.db,
      provisioners: { local: createLocalProvisioner({ command: hang, readyTimeoutMs: 60_000 }) },
      reconciler: { startTimeoutMs: 300, maxStartAttempts: 2, startRetryBackoffMs: 0 },
    });
    contexts.push(slow);
    await createEntry(database.db, { name: 'Hang-8B', provider: 'acme', offeredDedicated: true });
    const d = await deployEndpoint(slow, alice, { tenantId: tenantA, entryName: 'Hang-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'local' });
    await slow.reconciler.settled(d.id);
    const failed = await getDeployment(slow, alice, { tenantId: tenantA, deploymentId: d.id });
    expect(failed).toMatchObject({ state: 'failed', readyReplicas: 0, replicas: [] });
    expect(failed.lastError).toMatch(/attempt 2 of 2\): the replica was not ready within its start deadline/);
    // A user's start tries again (and fails the same way, bounded).
    await startDeployment(slow, alice, { tenantId: tenantA, deploymentId: d.id });
    await slow.reconciler.settled(d.id);
    expect((await getDeployment(slow, alice, { tenantId: tenantA, deploymentId: d.id })).state).toBe('failed');
    await deleteDeployment(slow, alice, { tenantId: tenantA, deploymentId: d.id });
  });

  it('waits longer after each failed start before the next (a runtime that crashes for a moment does not fail the deployment at once)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'backoff-'));
    const starts = join(dir, 'starts');
    // Crashes at boot, noting when it was started.
    const crash = [process.execPath, '-e', `require('node:fs').appendFileSync(${JSON.stringify(starts)}, Date.now() + '\\n'); process.exit(3)`, '--'];
    const backoff = createDeploymentsContext({
      db: database.db,
      provisioners: { local: createLocalProvisioner({ command: crash }) },
      reconciler: { maxStartAttempts: 3, startRetryBackoffMs: 300 },
    });
    contexts.push(backoff);
    await createEntry(database.db, { name: 'Crashy-8B', provider: 'acme', offeredDedicated: true });
    const d = await deployEndpoint(backoff, alice, { tenantId: tenantA, entryName: 'Crashy-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'local' });
    const failed = await until(async () => {
      const v = await getDeployment(backoff, alice, { tenantId: tenantA, deploymentId: d.id });
      return v.state === 'failed' ? v : null;
    });
    expect(failed.lastError).toMatch(/attempt 3 of 3\): .*code 3/);
    const at = (await readFile(starts, 'utf8')).trim().split('\n').map(Number);
    expect(at).toHaveLength(3);
    // Each wait is at least the backoff so far: 300 ms after the first failure, 600 ms after the second.
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(300);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(600);
    await deleteDeployment(backoff, alice, { tenantId: tenantA, deploymentId: d.id });
    await rm(dir, { recursive: true, force: true });
  });

  it('ends in failed with last_error when the runtime cannot start', async () => {
    const broken = newContext({ local: createLocalProvisioner({ command: [process.execPath, '-e', 'console.error("no GPU here"); process.exit(3)', '--'] }) });
    const d = await deployEndpoint(broken, alice, { tenantId: tenantA, entryName: 'Broken-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'local' });
    await broken.reconciler.settled(d.id);
    const failed = await getDeployment(broken, alice, { tenantId: tenantA, deploymentId: d.id });
    expect(failed).toMatchObject({ state: 'failed', readyReplicas: 0 });
    expect(failed.lastError).toMatch(/exited before it was ready \(code 3\): no GPU here/);
    expect(await snapshotOf(d.id)).toMatchObject({ state: 'failed', replicas: [] });
    await expect(
      deployEndpoint(broken, alice, { tenantId: tenantA, entryName: 'Broken-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'local' }),
    ).rejects.toMatchObject({ code: 'conflict' });
    await deleteDeployment(broken, alice, { tenantId: tenantA, deploymentId: d.id });
  });
});
