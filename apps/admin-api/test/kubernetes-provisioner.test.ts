// The Kubernetes provisioner against the fake API server (test/k8s-fake): real HTTP, the official
// client, Kubernetes' semantics for apply, scale, watch, errors; every manifest validated against the
// Kubernetes OpenAPI schemas (kubernetes-models).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Service } from 'kubernetes-models/v1';
import { createKubernetesProvisioner, type KubernetesDeploymentInfo } from '../src/modules/deployments/provisioners/kubernetes/kubernetes-provisioner.ts';
import { buildManifests, objectName, type ManifestInput } from '../src/modules/deployments/provisioners/kubernetes/manifests.ts';
import type { ReplicaSpec } from '../src/modules/deployments/provisioners/provisioner.ts';
import { startFakeCluster, until, type FakeCluster } from './k8s-fake/fake-cluster.ts';

const NS = 'inference';
const TENANT = '33333333-3333-4333-8333-333333333333';
const ENTRY = '11111111-1111-4111-8111-111111111111';
const defaults = {
  vllmImage: 'vllm/vllm-openai:v0.11.0',
  sglangImage: 'lmsysorg/sglang:v0.5',
  tgiImage: 'ghcr.io/huggingface/text-generation-inference:3',
  drainSeconds: 30,
};

let n = 0;
const newId = () => `22222222-2222-4222-8222-${String(++n).padStart(12, '0')}`;
const spec = (deploymentId: string, replicaId = 'r'): ReplicaSpec => ({
  replicaId,
  deploymentId,
  tenantId: TENANT,
  entryName: 'Llama-3.1-70B',
  servedModel: 'meta/Llama-3.1-70B',
  coldStartSeconds: 300,
  externalUrl: null,
});
const ref = (deploymentId: string, url: string) => ({ deploymentId, url, pid: null, port: null });

describe('Kubernetes provisioner on the fake API server', () => {
  let cluster: FakeCluster;
  const infos = new Map<string, KubernetesDeploymentInfo>();
  let provisioner: ReturnType<typeof createKubernetesProvisioner>;

  beforeAll(async () => {
    cluster = await startFakeCluster({ namespaces: [NS], bookmarkMs: 50 });
    provisioner = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      defaults,
      watchRetryMs: 20,
      lookup: async (id) => infos.get(id) ?? { entryId: ENTRY, gpuCount: 2, coldStartSeconds: 300, runtimeConfig: {} },
    });
    await provisioner.synced();
  });
  afterAll(async () => {
    await provisioner?.close?.();
    await cluster?.close();
  });
  afterEach(() => {
    for (const v of ['patch', 'update', 'create'] as const) for (const r of ['deployments', 'services', 'pods'] as const) cluster.api.allow(v, r);
    cluster.api.serviceQuota = undefined;
    cluster.kubelet.gpuQuota = undefined;
    cluster.kubelet.setFailure('*', null);
  });

  it('applies a Deployment and a Service (server-side apply, one field manager) that pass the Kubernetes schemas', async () => {
    const id = newId();
    const started = await provisioner.start(spec(id));
    expect(started.kind).toBe('vllm');
    expect(started.servedModel).toBe('meta/Llama-3.1-70B');
    expect(started.url).toMatch(/^http:\/\/127\.\d+\.\d+\.\d+:8000$/);

    const applies = cluster.api.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith(`/${objectName(id)}`));
    expect(applies.map((r) => r.path)).toEqual([
      `/apis/apps/v1/namespaces/${NS}/deployments/${objectName(id)}`,
      `/api/v1/namespaces/${NS}/services/${objectName(id)}`,
    ]);
    for (const r of applies) {
      expect(r.contentType).toBe('application/apply-patch+yaml');
      expect(r.query).toMatchObject({ fieldManager: 'infer-control-plane', force: 'true' });
    }

    const d = cluster.api.get('deployments', NS, objectName(id));
    const svc = cluster.api.get('services', NS, objectName(id));
    expect(d && svc).toBeTruthy();
    const labels = {
      'app.kubernetes.io/managed-by': 'infer-control-plane',
      'infer.dev/tenant-id': TENANT,
      'infer.dev/entry-id': ENTRY,
      'infer.dev/deployment-id': id,
    };
    expect(d?.metadata.labels).toEqual(labels);
    expect(svc?.metadata.labels).toEqual(labels);
    // As stored, status and server-filled fields included, both still pass the official schemas.
    expect(() => new Deployment(d as never).validate()).not.toThrow();
    expect(() => new Service(svc as never).validate()).not.toThrow();

    const pod = (d?.spec as { template: { metadata: { labels: Record<string, string> }; spec: Record<string, never> } }).template;
    expect(pod.metadata.labels).toEqual(labels);
    const c = (pod.spec.containers as unknown as Record<string, never>[])[0] as unknown as {
      image: string;
      args: string[];
      resources: { limits: Record<string, string> };
      startupProbe: { httpGet: { path: string }; periodSeconds: number; failureThreshold: number };
      readinessProbe: { httpGet: { path: string } };
      lifecycle: { preStop: { sleep: { seconds: number } } };
      volumeMounts: { name: string; mountPath: string }[];
    };
    expect(c.image).toBe('vllm/vllm-openai:v0.11.0');
    expect(c.args).toEqual([
      '--model',
      'Llama-3.1-70B',
      '--served-model-name',
      'meta/Llama-3.1-70B',
      '--tensor-parallel-size',
      '2',
      '--host',
      '0.0.0.0',
      '--port',
      '8000',
    ]);
    expect(c.resources.limits).toEqual({ 'nvidia.com/gpu': '2' });
    expect(c.readinessProbe.httpGet.path).toBe('/health');
    // 300 s Cold Start TTFT: three times that, so 900 s of startup budget before the kubelet gives up.
    expect(c.startupProbe.periodSeconds * c.startupProbe.failureThreshold).toBe(900);
    expect(c.lifecycle.preStop.sleep.seconds).toBeGreaterThan(0);
    expect(c.volumeMounts).toContainEqual({ name: 'dshm', mountPath: '/dev/shm' });
    expect((pod.spec as unknown as { volumes: unknown[] }).volumes).toContainEqual({ name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: '16Gi' } });
    expect((pod.spec as unknown as { terminationGracePeriodSeconds: number }).terminationGracePeriodSeconds).toBe(35);
    expect((svc?.spec as { selector: unknown }).selector).toEqual({ 'infer.dev/deployment-id': id });

    // Ownership: the applied fields are ours (Apply); spec.replicas belongs to our scale-subresource writes only.
    await provisioner.stop(ref(id, started.url)); // replicas 1 -> 0 through the scale subresource
    const managers = cluster.api.managedFields('deployments', NS, objectName(id));
    const apply = managers.find((m) => m.manager === 'infer-control-plane' && m.operation === 'Apply');
    const scale = managers.find((m) => m.manager === 'infer-control-plane' && m.subresource === 'scale');
    expect(apply?.paths.has('f:spec/f:template/f:spec/f:containers/k:{"name":"runtime"}/f:image')).toBe(true);
    expect(apply?.paths.has('f:spec/f:replicas')).toBe(false);
    expect(scale?.paths).toEqual(new Set(['f:spec/f:replicas']));
  });

  /** The manifests of a new deployment of entry 'm' with these inputs. */
  const manifestsOf = (input: Pick<ManifestInput, 'config'> & Partial<ManifestInput>) =>
    buildManifests(
      {
        namespace: NS,
        deploymentId: newId(),
        tenantId: TENANT,
        entryId: ENTRY,
        servedModel: 'm',
        entryName: 'm',
        gpuCount: 1,
        coldStartSeconds: null,
        ...input,
      },
      defaults,
    );

  it('validates the manifests of every runtime (vLLM, SGLang, TGI) and runtime options against the schemas', () => {
    for (const runtime of ['vllm', 'sglang', 'tgi'] as const) {
      const m = manifestsOf({
        gpuCount: 8,
        config: {
          runtime,
          image: 'registry.example.com/rt:1',
          modelSource: 's3://models/m',
          extraArgs: ['--max-model-len', '8192'],
          env: { VLLM_LOGGING_LEVEL: 'INFO' },
          secretEnv: { HF_TOKEN: { secret: 'hf', key: 'token' } },
          port: 9000,
          shmSize: '32Gi',
          resources: { cpu: '16', memory: '128Gi' },
          nodeSelector: { 'nvidia.com/gpu.product': 'H100' },
        },
      });
      expect(() => new Deployment(m.deployment as never).validate()).not.toThrow();
      expect(() => new Service(m.service as never).validate()).not.toThrow();
      expect(m.runtimeKind).toBe(runtime);
      expect(JSON.stringify(m.deployment)).toContain('"nvidia.com/gpu":"8"');
    }
  });

  it("starts each runtime with the entry's Context Length as its window, unless the operator's extraArgs set it", () => {
    const argsOf = (runtime: 'vllm' | 'sglang' | 'tgi', contextLength: number | null, extraArgs: string[] = []): string[] => {
      const m = manifestsOf({ contextLength, config: { runtime, extraArgs } });
      const pod = (m.deployment.spec as { template: { spec: { containers: { args: string[] }[] } } }).template;
      return pod.spec.containers[0]!.args;
    };
    const tail = (args: string[], n: number): string[] => args.slice(-n);
    expect(tail(argsOf('vllm', 65_536), 2)).toEqual(['--max-model-len', '65536']);
    expect(tail(argsOf('sglang', 65_536), 2)).toEqual(['--context-length', '65536']);
    expect(tail(argsOf('tgi', 65_536), 4)).toEqual(['--max-input-tokens', '65535', '--max-total-tokens', '65536']);
    // The operator's own setting wins and is not doubled (TGI refuses a flag given twice); extra args stay last.
    expect(argsOf('vllm', 65_536, ['--max-model-len=8192']).filter((a) => a.startsWith('--max-model-len'))).toEqual(['--max-model-len=8192']);
    expect(argsOf('tgi', 65_536, ['--max-total-tokens', '4096']).filter((a) => a.startsWith('--max-'))).toEqual(['--max-total-tokens']);
    expect(tail(argsOf('sglang', 65_536, ['--mem-fraction-static', '0.85']), 4)).toEqual(['--context-length', '65536', '--mem-fraction-static', '0.85']);
    // No Context Length: the runtime's own default.
    for (const runtime of ['vllm', 'sglang', 'tgi'] as const)
      expect(argsOf(runtime, null).some((a) => /^--(max-model-len|context-length|max-total-tokens)/.test(a))).toBe(false);
  });

  it('sets replicas through the scale subresource and learns readiness from the pod watch, never by polling pods', async () => {
    const id = newId();
    const before = cluster.api.requests.length;
    const [a, b] = await Promise.all([provisioner.start(spec(id, 'a')), provisioner.start(spec(id, 'b'))]);
    expect(a.url).not.toBe(b.url);
    expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(2);
    const mine = cluster.api.requests.slice(before);
    expect(mine.some((r) => r.method === 'PUT' && r.path.endsWith(`${objectName(id)}/scale`))).toBe(true);
    // No GET of any pod: readiness arrived through the watch that was already open.
    expect(mine.filter((r) => r.path.includes('/pods') && r.method === 'GET')).toEqual([]);

    expect(await provisioner.health(ref(id, a.url))).toBe(true);
    const pods = () => cluster.api.list('pods', NS, `infer.dev/deployment-id=${id}`);
    const podOf = (url: string) => pods().find((p) => `http://${(p.status as { podIP: string }).podIP}:8000` === url)?.metadata.name;
    const aPod = podOf(a.url);
    const bPod = podOf(b.url);
    await provisioner.stop(ref(id, a.url));
    // The pod that was asked to stop is the one that went (deletion cost + delete), and it is gone when stop returns.
    expect(pods().map((p) => p.metadata.name)).toEqual([bPod]);
    expect(cluster.kubelet.podLog.get(aPod ?? '')?.deletedAt).toBeDefined();
    expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(1);
    expect(await provisioner.health(ref(id, a.url))).toBe(false);
    expect(await provisioner.health(ref(id, b.url))).toBe(true);

    // Scale to zero keeps the Deployment and Service at replicas 0.
    await provisioner.stop(ref(id, b.url));
    expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(0);
    expect(pods()).toEqual([]);
    expect(cluster.api.get('services', NS, objectName(id))).toBeDefined();
  });

  it('a restarted control plane adopts the pods still running (health from its own watch) and stops them properly', async () => {
    const id = newId();
    const [a, b] = await Promise.all([provisioner.start(spec(id, 'a')), provisioner.start(spec(id, 'b'))]);
    const lookup = async () => ({ entryId: ENTRY, gpuCount: 2, coldStartSeconds: 300, runtimeConfig: {} });
    const next = createKubernetesProvisioner({ kubeConfig: cluster.kubeConfig(), namespace: NS, defaults, watchRetryMs: 20, lookup });
    try {
      // The rows of the earlier process are checked; both pods are ready, so both stay.
      expect(await next.health(ref(id, a.url))).toBe(true);
      expect(await next.health(ref(id, b.url))).toBe(true);
      expect(await next.health(ref(id, 'http://10.9.9.9:8000'))).toBe(false);
      await next.stop(ref(id, a.url));
      expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(1);
      expect(await next.health(ref(id, b.url))).toBe(true);
      const c = await next.start(spec(id, 'c'));
      expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(2);
      await next.stop(ref(id, b.url));
      await next.stop(ref(id, c.url));
      expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(0);
    } finally {
      await next.close?.();
    }
  });

  it('retries a scale write that lost a resourceVersion race (409) and converges', async () => {
    const id = newId();
    const first = await provisioner.start(spec(id, 'a'));
    // Another writer changes the Deployment between the provisioner's read and write of the scale subresource.
    cluster.api.beforeNext('PUT', `${objectName(id)}/scale`, () => {
      const d = cluster.api.get('deployments', NS, objectName(id));
      cluster.api.put('deployments', { ...d!, metadata: { ...d!.metadata, annotations: { touched: 'yes' } } }, 'someone-else');
    });
    const before = cluster.api.requests.length;
    const second = await provisioner.start(spec(id, 'b'));
    const puts = cluster.api.requests
      .slice(before)
      .filter((r) => r.method === 'PUT' && r.path.endsWith('/scale'))
      .map((r) => r.status);
    expect(puts).toEqual([409, 200]);
    expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(2);

    // The fake's own answer to a stale write: a Status body with reason Conflict.
    const stale = await fetch(`${cluster.url}/apis/apps/v1/namespaces/${NS}/deployments/${objectName(id)}/scale`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'autoscaling/v1',
        kind: 'Scale',
        metadata: { name: objectName(id), namespace: NS, resourceVersion: '1' },
        spec: { replicas: 5 },
      }),
    });
    expect(stale.status).toBe(409);
    expect(await stale.json()).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Conflict', code: 409 });
    await provisioner.stop(ref(id, first.url));
    await provisioner.stop(ref(id, second.url));
  });

  it('relists and resumes after a watch breaks: 410 Gone on resume, an ERROR 410 mid-stream, and a dropped connection', async () => {
    const id = newId();
    const lists = () =>
      cluster.api.requests.filter((r) => r.method === 'GET' && r.path === `/api/v1/namespaces/${NS}/pods` && r.query.watch === undefined).length;

    // 1. Connection cut; while it is down the namespace changes and etcd compacts past the informer's
    //    resourceVersion: the resume gets 410 Gone and the informer relists.
    const l1 = lists();
    cluster.api.breakWatches();
    cluster.api.put(
      'services',
      { apiVersion: 'v1', kind: 'Service', metadata: { name: `other-${id.slice(-4)}`, namespace: NS }, spec: { ports: [{ port: 80 }] } },
      'kubectl',
    );
    cluster.api.compact();
    const gone = cluster.api.goneCount;
    await until(() => lists() > l1, 10_000, 'a relist after 410');
    expect(cluster.api.goneCount).toBeGreaterThan(gone);
    const a = await provisioner.start(spec(id, 'a'));
    expect(await provisioner.health(ref(id, a.url))).toBe(true);

    // 2. The server ends the watch with an ERROR 410 event.
    const l2 = lists();
    cluster.api.compact();
    cluster.api.expireWatches();
    await until(() => lists() > l2, 10_000, 'a relist after ERROR 410');
    const b = await provisioner.start(spec(id, 'b'));

    // 3. Plain connection loss with history intact: resumes from its resourceVersion (no relist needed) and sees changes made meanwhile.
    cluster.api.breakWatches();
    const victim = cluster.api.list('pods', NS, `infer.dev/deployment-id=${id}`).find((p) => `http://${(p.status as { podIP: string }).podIP}:8000` === b.url);
    cluster.api.remove('pods', NS, victim!.metadata.name);
    await until(async () => !(await provisioner.health(ref(id, b.url))), 10_000, 'the informer to see the deletion');
    // The pod that vanished no longer counts: the Deployment keeps its count, so the replacement pod the
    // ReplicaSet makes is what the next start gets, and stopping the vanished replica changes nothing.
    await provisioner.stop(ref(id, b.url));
    expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(2);
    const replacement = await provisioner.start(spec(id, 'b2'));
    expect(replacement.url).not.toBe(b.url);
    expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(2);
    await provisioner.stop(ref(id, replacement.url));
    // Bookmarks were asked for and sent.
    expect(cluster.api.requests.some((r) => r.query.watch === 'true' && r.query.allowWatchBookmarks === 'true')).toBe(true);
    await provisioner.stop(ref(id, a.url));
    await provisioner.stop(ref(id, b.url));
  });

  it('tells operators in plain words why a replica cannot start: RBAC, quota, image pull, no GPU, crash loop', async () => {
    const fail = async (setup: () => void, id = newId()) => {
      setup();
      const err = await provisioner.start(spec(id)).then(
        () => null,
        (e: unknown) => e as Error & { permanent?: boolean },
      );
      expect(err).toBeInstanceOf(Error);
      return { err: err!, id };
    };

    const rbac = await fail(() => cluster.api.forbid('patch', 'deployments'));
    expect(rbac.err.message).toMatch(/not allowed to apply the Deployment infer-[0-9a-f-]+ in namespace inference \(Kubernetes RBAC: forbidden\)/);
    expect(rbac.err.message).toContain('cannot patch resource "deployments" in API group "apps"');
    expect(rbac.err.permanent).toBe(true);
    cluster.api.allow('patch', 'deployments');

    const svcQuota = await fail(() => (cluster.api.serviceQuota = 0));
    expect(svcQuota.err.message).toMatch(/namespace inference has no quota left to apply the Service .*exceeded quota: object-counts/);
    cluster.api.serviceQuota = undefined;

    const gpuQuota = await fail(() => (cluster.kubelet.gpuQuota = 1));
    expect(gpuQuota.err.message).toMatch(
      /namespace inference has no quota left for another replica \(ResourceQuota\): .*exceeded quota: gpu-quota, requested: requests.nvidia.com\/gpu=2/,
    );
    cluster.kubelet.gpuQuota = undefined;

    const pull = await fail(() => cluster.kubelet.setFailure('*', 'image-pull'));
    expect(pull.err.message).toMatch(
      /the image vllm\/vllm-openai:v0\.11\.0 could not be pulled \((ErrImagePull|ImagePullBackOff)\) for pod infer-.*check the image name and the registry credentials/,
    );

    const gpu = await fail(() => cluster.kubelet.setFailure('*', 'unschedulable'));
    expect(gpu.err.message).toMatch(/no node has 2 free GPUs \(nvidia\.com\/gpu\) for pod infer-.*Insufficient nvidia\.com\/gpu/);

    const crash = await fail(() => cluster.kubelet.setFailure('*', 'crash'));
    expect(crash.err.message).toMatch(/the runtime in pod infer-.* keeps failing \(CrashLoopBackOff, last exit Error code 1\)/);

    // No permission to watch pods: a start fails at once with the reason instead of waiting for a watch that never comes.
    cluster.kubelet.setFailure('*', null);
    cluster.api.forbid('list', 'pods');
    const blind = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      defaults,
      watchRetryMs: 20,
      lookup: async () => ({ entryId: ENTRY, gpuCount: 1, coldStartSeconds: null, runtimeConfig: {} }),
    });
    try {
      await until(
        async () => {
          const e = await blind.start(spec(newId())).then(
            () => null,
            (x: unknown) => x as Error & { permanent?: boolean },
          );
          return e && /not allowed to list pods in namespace inference \(Kubernetes RBAC: forbidden\)/.test(e.message) && e.permanent;
        },
        10_000,
        'a forbidden list to fail starts',
      );
    } finally {
      cluster.api.allow('list', 'pods');
      await blind.close?.();
    }

    // A failed start gives its slot back: nothing keeps asking for pods.
    for (const { id } of [pull, gpu, crash]) {
      await until(() => (cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas === 0, 10_000, 'replicas back to 0');
    }
  });

  it('waits K8S_UNSCHEDULABLE_GRACE_S for a GPU node (a cluster autoscaler), and fails with the reason after it', async () => {
    const patient = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      defaults,
      watchRetryMs: 20,
      unschedulableGraceMs: 60_000,
      lookup: async () => ({ entryId: ENTRY, gpuCount: 1, coldStartSeconds: null, runtimeConfig: {} }),
    });
    try {
      const id = newId();
      cluster.kubelet.setFailure(objectName(id), 'unschedulable');
      const started = patient.start(spec(id));
      const pods = () => cluster.api.list('pods', NS, `infer.dev/deployment-id=${id}`);
      await until(
        () => pods().some((p) => (p.status as { conditions?: { reason?: string }[] }).conditions?.some((c) => c.reason === 'Unschedulable')),
        10_000,
        'an unschedulable pod',
      );
      cluster.kubelet.setFailure(objectName(id), null); // a GPU node joined
      const r = await started;
      expect(await patient.health(ref(id, r.url))).toBe(true);
      await patient.stop(ref(id, r.url));
    } finally {
      await patient.close?.();
    }
    const hasty = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      defaults,
      watchRetryMs: 20,
      unschedulableGraceMs: 200,
      lookup: async () => ({ entryId: ENTRY, gpuCount: 1, coldStartSeconds: null, runtimeConfig: {} }),
    });
    try {
      const id = newId();
      cluster.kubelet.setFailure(objectName(id), 'unschedulable');
      await expect(hasty.start(spec(id))).rejects.toThrow(/no node has 1 free GPU \(nvidia\.com\/gpu\)/);
      cluster.kubelet.setFailure(objectName(id), null);
    } finally {
      await hasty.close?.();
    }
  });

  it('can route through the Service instead of pod IPs', async () => {
    const viaService = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      defaults,
      watchRetryMs: 20,
      address: 'service',
      lookup: async () => ({ entryId: ENTRY, gpuCount: 1, coldStartSeconds: null, runtimeConfig: {} }),
    });
    try {
      const id = newId();
      const r = await viaService.start(spec(id));
      expect(r.url).toBe(`http://${objectName(id)}.${NS}.svc:8000`);
      expect(await viaService.health(ref(id, r.url))).toBe(true);
      await viaService.stop(ref(id, r.url));
      expect((cluster.api.get('deployments', NS, objectName(id))?.spec as { replicas: number }).replicas).toBe(0);
    } finally {
      await viaService.close?.();
    }
  });

  it('deletes only what it owns: its Deployment and Service, not look-alikes or other objects', async () => {
    const id = newId();
    const r = await provisioner.start(spec(id));
    // Objects someone else made in the namespace, one with the very name ours would have for another id.
    const foreignId = newId();
    cluster.api.put(
      'deployments',
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: objectName(foreignId), namespace: NS, labels: { 'infer.dev/deployment-id': foreignId } },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: 'x' } },
          template: { metadata: { labels: { app: 'x' } }, spec: { containers: [{ name: 'x', image: 'x' }] } },
        },
      },
      'kubectl',
    );
    cluster.api.put(
      'services',
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'postgres', namespace: NS }, spec: { ports: [{ port: 5432 }] } },
      'kubectl',
    );

    await provisioner.stop(ref(id, r.url));
    await provisioner.release?.(id);
    expect(cluster.api.get('deployments', NS, objectName(id))).toBeUndefined();
    expect(cluster.api.get('services', NS, objectName(id))).toBeUndefined();
    await provisioner.release?.(foreignId); // not ours (no managed-by label): left alone
    await provisioner.sweep?.([]);
    expect(cluster.api.get('deployments', NS, objectName(foreignId))).toBeDefined();
    expect(cluster.api.get('services', NS, 'postgres')).toBeDefined();

    // The sweep removes owned objects whose deployment is no longer active, and keeps active ones.
    const kept = newId();
    const gone = newId();
    const k = await provisioner.start(spec(kept));
    const g = await provisioner.start(spec(gone));
    await provisioner.stop(ref(gone, g.url));
    // Someone scales ours by hand: the sweep brings it back to the replicas the control plane runs.
    await fetch(`${cluster.url}/apis/apps/v1/namespaces/${NS}/deployments/${objectName(kept)}/scale`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { replicas: 3 } }),
    });
    await until(() => cluster.api.list('pods', NS, `infer.dev/deployment-id=${kept}`).length === 3, 10_000, 'three pods');
    await until(
      async () => {
        await provisioner.sweep?.([kept]); // idempotent; repeated until the informer has seen the hand-made scale
        return (cluster.api.get('deployments', NS, objectName(kept))?.spec as { replicas: number }).replicas === 1;
      },
      10_000,
      'scaled back to 1',
    );
    expect(cluster.api.get('deployments', NS, objectName(gone))).toBeUndefined();
    expect(await provisioner.health(ref(kept, k.url))).toBe(true);
    expect(cluster.api.get('services', NS, objectName(gone))).toBeUndefined();
    expect(cluster.api.get('deployments', NS, objectName(kept))).toBeDefined();
    await provisioner.stop(ref(kept, k.url));
  });
});
