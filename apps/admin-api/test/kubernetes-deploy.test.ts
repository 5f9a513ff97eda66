// A dedicated deployment with `provisioner: kubernetes` through the deployment service and the
// reconciler, on the database and the fake API server whose simulated kubelet runs each pod as a real
// runtime-sim process on its pod IP: the replica reaches the routing snapshot and answers there, GPU
// time runs from pod creation to termination, failures become FAILED with an operator's lastError,
// deletion removes the objects.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { loadEnv } from '../src/env.ts';
import type { Principal } from '../src/modules/access/principal.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { adminGetRuntimeConfig, adminSetRuntimeConfig } from '../src/modules/catalog/runtime-config.service.ts';
import { startAutoscaler } from '../src/modules/deployments/autoscaler/autoscaler.ts';
import { createSoleLeader } from '../src/modules/deployments/autoscaler/leader-election.ts';
import { availableProvisioners } from '../src/modules/deployments/available-provisioners.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../src/modules/deployments/deployments-context.ts';
import { deleteDeployment, deployEndpoint, getDeployment, stopDeployment } from '../src/modules/deployments/deployments.service.ts';
import { kubernetesProvisionerFromEnv } from '../src/modules/deployments/provisioners/kubernetes/from-env.ts';
import { createKubernetesLookup } from '../src/modules/deployments/provisioners/kubernetes/kubernetes-lookup.ts';
import { createKubernetesProvisioner } from '../src/modules/deployments/provisioners/kubernetes/kubernetes-provisioner.ts';
import { objectName } from '../src/modules/deployments/provisioners/kubernetes/manifests.ts';
import { buildSnapshot } from '../src/modules/snapshots/snapshots.service.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';
import { runtimeContainer, startFakeCluster, until, type FakeCluster } from './k8s-fake/fake-cluster.ts';

const NS = 'inference';

describe.each(testBackends())('Kubernetes deployments end to end (%s)', (kind) => {
  let database: TestDatabase;
  let cluster: FakeCluster;
  let ctx: DeploymentsContext;
  let admin: Principal;
  let tenantId: string;
  let entryId: string;
  const port = 20_000 + Math.floor(Math.random() * 20_000);

  beforeAll(async () => {
    database = await createTestDb(kind);
    cluster = await startFakeCluster({ namespaces: [NS], kubelet: { runtimeSim: true, terminationMs: 50 } });
    const provisioner = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      watchRetryMs: 20,
      lookup: createKubernetesLookup(database.db),
      defaults: { vllmImage: 'vllm/vllm-openai:latest', sglangImage: 's', tgiImage: 't', drainSeconds: 5 },
    });
    ctx = createDeploymentsContext({
      db: database.db,
      provisioners: { kubernetes: provisioner },
      reconciler: { startTimeoutMs: 30_000, maxStartAttempts: 2, drainGraceMs: 10, drainTimeoutMs: 2_000 },
    });
    const user = await createUser(database.db, { email: 'ops@example.com', password: 'long enough password', isPlatformAdmin: true });
    const tenant = await createTenant(database.db, { slug: 'k8s', name: 'K8s' });
    tenantId = tenant.id;
    admin = { kind: 'user', userId: user.id, email: user.email, isPlatformAdmin: true, memberships: new Map([[tenant.id, 'owner']]), sessionId: 's' };
    const entry = await createEntry(database.db, {
      name: 'acme/Llama-70B',
      provider: 'acme',
      gpuCount: 2,
      coldStartSeconds: 30,
      contextLength: 131_072,
      offeredDedicated: true,
    });
    entryId = entry.id;
  });
  afterAll(async () => {
    await ctx?.reconciler.close();
    await cluster?.close();
    await database?.close();
  });

  it('runtimeConfig is validated, stored and read by platform admins only, with the bad field named', async () => {
    await expect(adminSetRuntimeConfig(database.db, admin, entryId, { extraArgs: ['--ok', 'bad\nline'] })).rejects.toMatchObject({
      code: 'invalid',
      param: 'runtimeConfig.extraArgs.1',
    });
    await expect(adminSetRuntimeConfig(database.db, admin, entryId, '{not json')).rejects.toMatchObject({ code: 'invalid', param: 'runtimeConfig' });
    await expect(adminSetRuntimeConfig(database.db, admin, entryId, { imag: 'typo' })).rejects.toMatchObject({ code: 'invalid' });
    const member: Principal = { ...(admin as Extract<Principal, { kind: 'user' }>), isPlatformAdmin: false };
    await expect(adminSetRuntimeConfig(database.db, member, entryId, { port })).rejects.toMatchObject({ code: 'forbidden' });
    await expect(adminGetRuntimeConfig(database.db, member, entryId)).rejects.toMatchObject({ code: 'forbidden' });
    expect(await adminSetRuntimeConfig(database.db, admin, entryId, JSON.stringify({ port, extraArgs: ['--max-model-len', '8192'] }))).toEqual({
      port,
      extraArgs: ['--max-model-len', '8192'],
    });
    expect(await adminGetRuntimeConfig(database.db, admin, entryId)).toEqual({ port, extraArgs: ['--max-model-len', '8192'] });
    expect(availableProvisioners(ctx, admin)).toEqual(['kubernetes']);
  });

  it('deploys: pods become replicas in the routing snapshot and answer there; GPU time runs from pod creation to termination', async () => {
    const deployedAt = Date.now();
    const d = await deployEndpoint(ctx, admin, { tenantId, entryName: 'acme/Llama-70B', minReplicas: 1, maxReplicas: 2, provisioner: 'kubernetes' });
    await until(async () => (await getDeployment(ctx, admin, { tenantId, deploymentId: d.id })).state === 'running', 60_000, 'RUNNING');

    const k8s = cluster.api.get('deployments', NS, objectName(d.id));
    expect(k8s?.metadata.labels).toMatchObject({ 'infer.dev/tenant-id': tenantId, 'infer.dev/entry-id': entryId, 'infer.dev/deployment-id': d.id });
    const container = runtimeContainer(k8s);
    expect(container.args).toEqual([
      '--model',
      'acme/Llama-70B',
      '--served-model-name',
      'acme/Llama-70B',
      '--tensor-parallel-size',
      '2',
      '--host',
      '0.0.0.0',
      '--port',
      String(port),
      '--max-model-len',
      '8192',
    ]);
    // The catalog's Context Length reaches the manifests (the operator's --max-model-len above wins over it).
    expect((await createKubernetesLookup(database.db)(d.id))?.contextLength).toBe(131_072);

    const snap = (await buildSnapshot(database.db)).deployments.find((x) => x.id === d.id);
    expect(snap?.replicas).toHaveLength(1);
    const replica = snap!.replicas[0]!;
    const pod = cluster.api.list('pods', NS, `infer.dev/deployment-id=${d.id}`)[0]!;
    expect(replica.url).toBe(`http://${(pod.status as { podIP: string }).podIP}:${port}`);
    expect(replica.kind).toBe('vllm');
    // The data plane would send here: the pod's runtime answers on its pod IP.
    const res = await fetch(`${replica.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: replica.servedModel, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(1);

    const intervals = await database.db.selectFrom('replicaIntervals').selectAll().where('deploymentId', '=', d.id).orderBy('startedAt').execute();
    expect(intervals.length).toBeGreaterThan(0);
    expect(intervals.every((i) => i.gpuCount === 2)).toBe(true);
    const podLife = cluster.kubelet.podLog.get(pod.metadata.name)!;
    // Opened after the deploy call and before the scale-up that created the pod (ordering, not timing).
    expect(new Date(intervals[0]!.startedAt).getTime()).toBeGreaterThanOrEqual(deployedAt - 5);
    expect(new Date(intervals[0]!.startedAt).getTime()).toBeLessThanOrEqual(podLife.createdAt + 5);

    await stopDeployment(ctx, admin, { tenantId, deploymentId: d.id });
    await ctx.reconciler.settled(d.id);
    const stoppedAt = Date.now();
    await until(() => cluster.kubelet.podLog.get(pod.metadata.name)?.deletedAt, 10_000, 'the pod to terminate');
    const closed = await database.db.selectFrom('replicaIntervals').selectAll().where('deploymentId', '=', d.id).execute();
    expect(closed.every((i) => i.endedAt !== null)).toBe(true);
    const lastEnd = Math.max(...closed.map((i) => new Date(i.endedAt!).getTime()));
    // Closed when the pod was gone (stop waits for the watch's DELETED), not when it was asked to stop.
    expect(lastEnd).toBeGreaterThanOrEqual(podLife.deletedAt! - 50);
    expect(lastEnd).toBeLessThanOrEqual(stoppedAt + 5);
    expect((cluster.api.get('deployments', NS, objectName(d.id))?.spec as { replicas: number }).replicas).toBe(0);

    await deleteDeployment(ctx, admin, { tenantId, deploymentId: d.id });
    await until(() => !cluster.api.get('deployments', NS, objectName(d.id)) && !cluster.api.get('services', NS, objectName(d.id)), 10_000, 'objects deleted');
  });

  /** One control-plane process: its own provisioner (watch), reconciler and autoscaler, as app.ts wires them. */
  const controlPlane = () => {
    const provisioner = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      watchRetryMs: 20,
      lookup: createKubernetesLookup(database.db),
      defaults: { vllmImage: 'vllm/vllm-openai:latest', sglangImage: 's', tgiImage: 't', drainSeconds: 5 },
    });
    const deployments = createDeploymentsContext({
      db: database.db,
      provisioners: { kubernetes: provisioner },
      reconciler: { startTimeoutMs: 30_000, maxStartAttempts: 2, drainGraceMs: 10, drainTimeoutMs: 2_000 },
    });
    const autoscaler = startAutoscaler(deployments, createSoleLeader(), { tickMs: 50, heartbeatMs: 50, sweepMs: 60_000, scrapeRuntimeMetrics: false });
    return {
      deployments,
      /** The app's shutdown order (a rolling update's SIGTERM). */
      async close() {
        await autoscaler.close();
        await deployments.reconciler.close();
      },
    };
  };
  const intervalsOf = (entryId: string) =>
    database.db.selectFrom('replicaIntervals').selectAll().where('entryId', '=', entryId).orderBy('startedAt').orderBy('id').execute();
  const podsOf = (id: string) => cluster.api.list('pods', NS, `infer.dev/deployment-id=${id}`).map((p) => p.metadata.name);

  it('a control-plane restart hands its pods over: the old process leaves them serving, the new leader adopts them (routing, billing, stop)', async () => {
    const entry = await createEntry(database.db, { name: 'acme/Handover-8B', provider: 'acme', gpuCount: 2, offeredDedicated: true });
    await adminSetRuntimeConfig(database.db, admin, entry.id, { port });
    const intervals = () => intervalsOf(entry.id);
    const a = controlPlane();
    let b: ReturnType<typeof controlPlane> | undefined;
    try {
      const d = await deployEndpoint(a.deployments, admin, {
        tenantId,
        entryName: 'acme/Handover-8B',
        minReplicas: 2,
        maxReplicas: 2,
        provisioner: 'kubernetes',
      });
      await until(async () => (await getDeployment(a.deployments, admin, { tenantId, deploymentId: d.id })).state === 'running', 60_000, 'RUNNING');
      const rows = await database.db.selectFrom('deploymentReplicas').selectAll().where('deploymentId', '=', d.id).orderBy('createdAt').execute();
      expect(rows).toHaveLength(2);
      const podAt = (url: string) =>
        cluster.api.list('pods', NS, `infer.dev/deployment-id=${d.id}`).find((p) => url.includes(`//${(p.status as { podIP: string }).podIP}:`))!;
      const [sick, well] = rows.map((r) => podAt(r.url).metadata.name);
      await until(async () => (await intervals()).filter((i) => i.endedAt === null && i.phase === 'idle').length === 2, 10_000, 'both billed as idle');

      await a.close();
      // Handed over, not stopped: the pods serve on, their rows and their open intervals stay (the rows keep them routed).
      expect(podsOf(d.id).sort()).toEqual([sick, well].sort());
      expect((cluster.api.get('deployments', NS, objectName(d.id))?.spec as { replicas: number }).replicas).toBe(2);
      expect(
        (await database.db.selectFrom('deploymentReplicas').select(['id', 'state']).where('deploymentId', '=', d.id).execute()).map((r) => r.state),
      ).toEqual(['ready', 'ready']);
      const handedOver = (await intervals()).filter((i) => i.endedAt === null);
      expect(handedOver).toHaveLength(2);

      // Meanwhile the entry's GPU Count changes (the pods keep the GPUs they started with), and the older pod stops
      // being ready: the new leader must replace that one only, not size the Deployment to what it claimed so far (none).
      await database.db.updateTable('catalogEntries').set({ gpuCount: 8 }).where('id', '=', entry.id).execute();
      const unready = cluster.api.get('pods', NS, sick!)!;
      cluster.api.put('pods', { ...unready, status: { ...(unready.status as object), conditions: [{ type: 'Ready', status: 'False' }] } }, 'kubelet');

      b = controlPlane();
      const next = b;
      const wellRow = rows[1]!;
      const adopted = await until(
        async () => (await intervals()).find((i) => i.replicaId === wellRow.id && i.endedAt === null && !handedOver.some((h) => h.id === i.id)),
        10_000,
        'a new interval of the adopted replica',
      );
      expect(next.deployments.reconciler.ownedReplicas().has(wellRow.id)).toBe(true);
      // Billed again from its adoption, for the 2 GPUs it holds; its earlier interval ended at its last heartbeat.
      expect(adopted).toMatchObject({ phase: 'idle', gpuCount: 2 });
      const before = (await intervals()).find((i) => i.id === handedOver.find((h) => h.replicaId === wellRow.id)!.id)!;
      expect(before.endedAt).toEqual(before.lastHeartbeatAt);
      expect(new Date(before.endedAt!).getTime()).toBeLessThanOrEqual(new Date(adopted.startedAt).getTime());

      // The unready one is replaced; the ready one was never touched.
      const readyRows = async () =>
        (await database.db.selectFrom('deploymentReplicas').select(['id', 'state']).where('deploymentId', '=', d.id).execute()).filter(
          (r) => r.state === 'ready',
        );
      await until(
        async () => {
          const ready = await readyRows();
          return ready.length === 2 && !ready.some((r) => r.id === rows[0]!.id) && !podsOf(d.id).includes(sick!);
        },
        30_000,
        'the unready pod replaced',
      );
      expect(cluster.kubelet.podLog.get(well!)?.deletedAt).toBeUndefined();
      expect(podsOf(d.id)).toContain(well);
      expect((await buildSnapshot(database.db)).deployments.find((x) => x.id === d.id)?.replicas.map((r) => r.url)).toContain(wellRow.url);
      const open = (await intervals()).filter((i) => i.endedAt === null);
      expect(open).toHaveLength(2);
      expect(new Set(open.map((i) => i.replicaId)).size).toBe(2);

      // They are the new leader's to stop: the pods go, their intervals close.
      await stopDeployment(next.deployments, admin, { tenantId, deploymentId: d.id });
      await next.deployments.reconciler.settled(d.id);
      await until(() => cluster.kubelet.podLog.get(well!)?.deletedAt, 10_000, 'the pod to terminate');
      expect((await intervals()).every((i) => i.endedAt !== null)).toBe(true);
      await deleteDeployment(next.deployments, admin, { tenantId, deploymentId: d.id });
    } finally {
      await a.close();
      await b?.close();
    }
  }, 60_000);

  it('a graceful restart during a start leaves the pod coming up for the next leader (not scaled away, not started twice)', async () => {
    const entry = await createEntry(database.db, { name: 'acme/Slowboot-8B', provider: 'acme', gpuCount: 1, offeredDedicated: true });
    // A runtime that takes a while to boot: the pod exists, not ready, while the control plane restarts.
    await adminSetRuntimeConfig(database.db, admin, entry.id, { port, env: { SIM_COLD_START_MS: '1500' } });
    const a = controlPlane();
    let b: ReturnType<typeof controlPlane> | undefined;
    try {
      const d = await deployEndpoint(a.deployments, admin, {
        tenantId,
        entryName: 'acme/Slowboot-8B',
        minReplicas: 1,
        maxReplicas: 1,
        provisioner: 'kubernetes',
      });
      const [pod] = await until(() => (podsOf(d.id).length === 1 ? podsOf(d.id) : null), 10_000, 'the pod created');
      expect(cluster.kubelet.podLog.get(pod!)?.readyAt).toBeUndefined();
      await a.close();
      expect(cluster.kubelet.podLog.get(pod!)?.deletedAt).toBeUndefined();
      expect((cluster.api.get('deployments', NS, objectName(d.id))?.spec as { replicas: number }).replicas).toBe(1);

      b = controlPlane();
      const next = b;
      await until(async () => (await getDeployment(next.deployments, admin, { tenantId, deploymentId: d.id })).state === 'running', 30_000, 'RUNNING');
      // The same pod serves: one cold start, not two.
      expect(podsOf(d.id)).toEqual([pod]);
      expect([...cluster.kubelet.podLog.values()].filter((l) => l.deployment === objectName(d.id))).toHaveLength(1);
      await stopDeployment(next.deployments, admin, { tenantId, deploymentId: d.id });
      await next.deployments.reconciler.settled(d.id);
      await deleteDeployment(next.deployments, admin, { tenantId, deploymentId: d.id });
    } finally {
      await a.close();
      await b?.close();
    }
  }, 60_000);

  it('a new leader that cannot list the pods keeps routing to them but bills none until it has seen them', async () => {
    const entry = await createEntry(database.db, { name: 'acme/Unseen-8B', provider: 'acme', gpuCount: 1, offeredDedicated: true });
    await adminSetRuntimeConfig(database.db, admin, entry.id, { port });
    const a = controlPlane();
    let b: ReturnType<typeof controlPlane> | undefined;
    try {
      const d = await deployEndpoint(a.deployments, admin, {
        tenantId,
        entryName: 'acme/Unseen-8B',
        minReplicas: 1,
        maxReplicas: 1,
        provisioner: 'kubernetes',
      });
      await until(async () => (await getDeployment(a.deployments, admin, { tenantId, deploymentId: d.id })).state === 'running', 60_000, 'RUNNING');
      const row = await database.db.selectFrom('deploymentReplicas').selectAll().where('deploymentId', '=', d.id).executeTakeFirstOrThrow();
      await a.close();

      cluster.api.forbid('list', 'pods');
      b = controlPlane();
      const next = b;
      // Taken over: the earlier leader's interval closed at its last heartbeat, the row checked.
      await until(async () => (await intervalsOf(entry.id)).every((i) => i.endedAt !== null), 10_000, 'the earlier interval closed');
      await next.deployments.reconciler.reconcileAll();
      await next.deployments.reconciler.settled(d.id);
      // The pod cannot be seen: still routed (it most likely serves), not adopted, not billed.
      expect(next.deployments.reconciler.ownedReplicas().has(row.id)).toBe(false);
      expect((await intervalsOf(entry.id)).filter((i) => i.endedAt === null)).toEqual([]);
      expect((await buildSnapshot(database.db)).deployments.find((x) => x.id === d.id)?.replicas.map((r) => r.url)).toEqual([row.url]);

      // Seen again: adopted and billed from then on.
      cluster.api.allow('list', 'pods');
      await until(
        async () => {
          await next.deployments.reconciler.reconcileAll();
          return next.deployments.reconciler.ownedReplicas().has(row.id);
        },
        15_000,
        'the adoption once the pods can be listed',
      );
      expect((await intervalsOf(entry.id)).filter((i) => i.endedAt === null)).toMatchObject([{ replicaId: row.id, gpuCount: 1 }]);
      await stopDeployment(next.deployments, admin, { tenantId, deploymentId: d.id });
      await next.deployments.reconciler.settled(d.id);
      await deleteDeployment(next.deployments, admin, { tenantId, deploymentId: d.id });
    } finally {
      cluster.api.allow('list', 'pods');
      await a.close();
      await b?.close();
    }
  }, 60_000);

  it('an image that cannot be pulled fails the deployment with words an operator understands', async () => {
    const entry = await createEntry(database.db, { name: 'acme/Broken-8B', provider: 'acme', gpuCount: 1, offeredDedicated: true });
    await adminSetRuntimeConfig(database.db, admin, entry.id, { image: 'registry.example.com/nope:1', port });
    cluster.kubelet.setFailure('*', 'image-pull');
    try {
      const d = await deployEndpoint(ctx, admin, { tenantId, entryName: 'acme/Broken-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'kubernetes' });
      const failed = await until(
        async () => {
          const v = await getDeployment(ctx, admin, { tenantId, deploymentId: d.id });
          return v.state === 'failed' ? v : null;
        },
        30_000,
        'FAILED',
      );
      expect(failed.lastError).toMatch(
        /replica start failed \(attempt 2 of 2\): the image registry\.example\.com\/nope:1 could not be pulled \((ErrImagePull|ImagePullBackOff)\)/,
      );
      await deleteDeployment(ctx, admin, { tenantId, deploymentId: d.id });
    } finally {
      cluster.kubelet.setFailure('*', null);
    }
  });

  it('an RBAC refusal fails the deployment at once (no retries), naming the permission', async () => {
    const entry = await createEntry(database.db, { name: 'acme/Denied-8B', provider: 'acme', gpuCount: 1, offeredDedicated: true });
    await adminSetRuntimeConfig(database.db, admin, entry.id, { port });
    cluster.api.forbid('patch', 'deployments');
    try {
      const d = await deployEndpoint(ctx, admin, { tenantId, entryName: 'acme/Denied-8B', minReplicas: 1, maxReplicas: 1, provisioner: 'kubernetes' });
      const failed = await until(
        async () => {
          const v = await getDeployment(ctx, admin, { tenantId, deploymentId: d.id });
          return v.state === 'failed' ? v : null;
        },
        30_000,
        'FAILED',
      );
      expect(failed.lastError).toMatch(
        /^replica start failed: the control plane is not allowed to apply the Deployment infer-[0-9a-f-]+ in namespace inference \(Kubernetes RBAC: forbidden\)/,
      );
      const attempts = cluster.api.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith(`/deployments/${objectName(d.id)}`));
      expect(attempts.map((r) => r.status)).toEqual([403]);
      await deleteDeployment(ctx, admin, { tenantId, deploymentId: d.id });
    } finally {
      cluster.api.allow('patch', 'deployments');
    }
  });

  it('exists only when configured: K8S_NAMESPACE turns it on and needs credentials', () => {
    const base = { NODE_TOKEN: 'node-token-0123456789abcdef' };
    expect(kubernetesProvisionerFromEnv(loadEnv(base), database.db)).toBeUndefined();
    expect(() => loadEnv({ ...base, K8S_NAMESPACE: 'inference' })).toThrow(/K8S_NAMESPACE: needs KUBECONFIG/);
    expect(() => loadEnv({ ...base, K8S_NAMESPACE: 'Not_A_Namespace', KUBECONFIG: '/x' })).toThrow(/K8S_NAMESPACE must be a Kubernetes namespace name/);
    expect(() => kubernetesProvisionerFromEnv(loadEnv({ ...base, K8S_NAMESPACE: 'inference', KUBECONFIG: '/nonexistent/kubeconfig' }), database.db)).toThrow(
      /K8S_NAMESPACE is set but the Kubernetes credentials could not be loaded from KUBECONFIG \/nonexistent\/kubeconfig/,
    );
    const env = loadEnv({ ...base, K8S_NAMESPACE: 'inference', KUBERNETES_SERVICE_HOST: '10.0.0.1' });
    expect(env).toMatchObject({ K8S_VLLM_IMAGE: 'vllm/vllm-openai:latest', K8S_REPLICA_ADDRESS: 'pod', K8S_DRAIN_SECONDS: 30 });
  });
});
