import { createHash } from 'node:crypto';
import {
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  ListWatch,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubernetesObject,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Provisioner, ReplicaRef, ReplicaSpec, StartedReplica } from '../provisioner.ts';
import { apiStatus, deploymentProblem, describeApiError, KubernetesProvisionError, podProblem } from './kube-errors.ts';
import { buildManifests, FIELD_MANAGER, LABELS, objectName, OWNED_SELECTOR, POD_DELETION_COST, type Manifests, type RuntimeDefaults } from './manifests.ts';
import type { RuntimeConfig } from './runtime-config.ts';

/** What the provisioner needs to know about a deployment beyond the replica spec (read from the database). */
export interface KubernetesDeploymentInfo {
  readonly entryId: string;
  readonly gpuCount: number;
  readonly coldStartSeconds: number | null;
  /** The entry's Context Length (absent: the replica spec's). */
  readonly contextLength?: number | null;
  readonly runtimeConfig: RuntimeConfig;
}

export interface KubernetesLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface KubernetesProvisionerOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly defaults: RuntimeDefaults;
  readonly lookup: (deploymentId: string) => Promise<KubernetesDeploymentInfo | null>;
  /** Replica addresses in the routing snapshot: each ready pod's IP (default) or the Service's cluster DNS name. */
  readonly address?: 'pod' | 'service';
  /** A pod the scheduler cannot place fails its start after this long (a cluster autoscaler may add a GPU node meanwhile; default 0). */
  readonly unschedulableGraceMs?: number;
  /** First delay before a broken watch is restarted (doubles up to 30 s; default 1 s). */
  readonly watchRetryMs?: number;
  readonly log?: KubernetesLog;
}

interface Waiter {
  readonly replicaId: string;
  readonly since: number;
  resolve(pod: V1Pod): void;
  reject(err: Error): void;
}

interface DeploymentState {
  readonly id: string;
  readonly waiters: Waiter[];
  /** Pods serving as replicas (by pod name): the replica URL each was handed out under. */
  readonly claims: Map<string, string>;
  /** Starts entered that have not queued their waiter yet (still applying the manifests): their slots count already. */
  reserved: number;
  manifests?: Manifests;
  appliedHash?: string;
  scaling: Promise<void>;
  lastScaled?: number;
}

const podReady = (p: V1Pod): boolean =>
  !p.metadata?.deletionTimestamp &&
  !!p.status?.podIP &&
  p.status.phase === 'Running' &&
  !!p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
/** The runtime's port as the pod declares it (`buildManifests` names it `http`). */
const declaredPort = (p: V1Pod): number | undefined => p.spec?.containers.flatMap((c) => c.ports ?? []).find((port) => port.name === 'http')?.containerPort;
const deploymentIdOf = (o: KubernetesObject): string | undefined => o.metadata?.labels?.[LABELS.deployment];
const owned = (o: KubernetesObject): boolean => o.metadata?.labels?.[LABELS.managedBy] === FIELD_MANAGER;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** A Watch that asks for bookmarks, so a quiet namespace still advances the informer's resourceVersion. */
class BookmarkWatch extends Watch {
  override watch(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    cb: (phase: string, obj: unknown, w?: unknown) => void,
    done: (err: unknown) => void,
  ) {
    return super.watch(path, { ...query, allowWatchBookmarks: true }, cb, done);
  }
}

/**
 * Dedicated replicas as pods of one Kubernetes Deployment (plus a Service) per deployment, written by
 * server-side apply under one field manager. The reconciler still starts and stops replicas one by
 * one: a start raises the Deployment's replica count through the scale subresource and resolves when
 * the pod informer sees a pod become ready; a stop marks that pod cheapest to delete
 * (`controller.kubernetes.io/pod-deletion-cost`), lowers the count, and returns once the pod is gone
 * (so GPU time runs until termination).
 */
export function createKubernetesProvisioner(opts: KubernetesProvisionerOptions): Provisioner & {
  /** Resolves once both informers listed and watch (tests, start-up). */
  readonly synced: () => Promise<void>;
} {
  const { kubeConfig: kc, namespace, defaults, lookup } = opts;
  const log = opts.log ?? { info() {}, warn() {} };
  const addressMode = opts.address ?? 'pod';
  const unschedulableGraceMs = opts.unschedulableGraceMs ?? 0;
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const apply = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const states = new Map<string, DeploymentState>();
  const exitListeners: ((deploymentId: string) => void)[] = [];
  const goneWaiters = new Map<string, (() => void)[]>();
  /** Pods being stopped on purpose (their end is not a failure). */
  const stopping = new Set<string>();
  let closed = false;
  /** Not leading (shut down, or leadership lost): its pods are handed over and replica counts left as they are. */
  let handingOver = false;

  const state = (id: string): DeploymentState => {
    let s = states.get(id);
    if (!s) {
      s = { id, waiters: [], claims: new Map(), reserved: 0, scaling: Promise.resolve() };
      states.set(id, s);
    }
    return s;
  };
  const slots = (s: DeploymentState) => s.waiters.length + s.claims.size + s.reserved;
  const urlOf = (s: DeploymentState, pod: V1Pod): string => {
    // A pod an earlier control-plane process created (its manifests unknown here): the port it declares.
    const port = s.manifests?.port ?? declaredPort(pod) ?? 8000;
    return addressMode === 'service' ? `http://${objectName(s.id)}.${namespace}.svc:${port}` : `http://${pod.status?.podIP}:${port}`;
  };

  /** Why an informer cannot list (RBAC, API down), until a list succeeds again. */
  const listErrors = new Map<'pods' | 'deployments', KubernetesProvisionError>();
  const readyRejects = new Set<(err: Error) => void>();
  const tracked =
    <T>(name: 'pods' | 'deployments', list: () => Promise<T>) =>
    async (): Promise<T> => {
      try {
        const result = await list();
        listErrors.delete(name);
        return result;
      } catch (err) {
        const e = describeApiError(err, `list ${name}`, namespace);
        listErrors.set(name, e);
        for (const reject of readyRejects) reject(e);
        // Starts waiting on this watch would wait for nothing: they fail with the reason.
        for (const s of states.values()) failWaiters(s, e);
        throw err;
      }
    };
  const pods = new ListWatch<V1Pod>(
    `/api/v1/namespaces/${namespace}/pods`,
    new BookmarkWatch(kc),
    tracked('pods', () => core.listNamespacedPod({ namespace, labelSelector: OWNED_SELECTOR })),
    false,
    OWNED_SELECTOR,
  );
  const deployments = new ListWatch<V1Deployment>(
    `/apis/apps/v1/namespaces/${namespace}/deployments`,
    new BookmarkWatch(kc),
    tracked('deployments', () => apps.listNamespacedDeployment({ namespace, labelSelector: OWNED_SELECTOR })),
    false,
    OWNED_SELECTOR,
  );

  /** Keeps an informer running: a watch that fails (connection lost, API down) is restarted with backoff; 410 Gone relists inside ListWatch. */
  function keepRunning(name: string, informer: ListWatch<V1Pod> | ListWatch<V1Deployment>): Promise<void> {
    let delay = opts.watchRetryMs ?? 1_000;
    let first: (() => void) | undefined;
    const ready = new Promise<void>((resolve) => (first = resolve));
    const run = async () => {
      while (!closed) {
        try {
          await informer.start();
          // start() also returns after a failed list (reported through 'error'): only a list that worked counts.
          if (listErrors.has(name as 'pods' | 'deployments')) return;
          delay = opts.watchRetryMs ?? 1_000;
          first?.();
          return;
        } catch (err) {
          log.warn({ err, informer: name }, 'Kubernetes watch could not start; retrying');
          await sleep(delay);
          delay = Math.min(delay * 2, 30_000);
        }
      }
    };
    informer.on('error', (err: unknown) => {
      if (closed) return;
      log.warn({ informer: name, status: apiStatus(err), err: err instanceof Error ? err.message : String(err) }, 'Kubernetes watch broke; relisting');
      void sleep(delay).then(() => {
        delay = Math.min(delay * 2, 30_000);
        if (!closed) void run();
      });
    });
    void run();
    return ready;
  }

  /** Hands ready pods to waiting starts (oldest first) and fails starts whose pods cannot become ready. */
  function settle(s: DeploymentState): void {
    if (s.waiters.length === 0) return;
    const mine = pods.list(namespace).filter((p) => deploymentIdOf(p) === s.id);
    const claimed = new Set(s.claims.keys());
    for (const p of mine) {
      const name = p.metadata?.name ?? '';
      if (!podReady(p) || claimed.has(name) || stopping.has(name)) continue;
      const w = s.waiters.shift();
      if (!w) return;
      s.claims.set(name, urlOf(s, p));
      claimed.add(name);
      w.resolve(p);
    }
    if (s.waiters.length === 0) return;
    const d = deployments.get(objectName(s.id), namespace);
    const dProblem = d ? deploymentProblem(d, namespace) : null;
    let problem = dProblem;
    let unschedulable = false;
    if (!problem) {
      for (const p of mine) {
        if (p.metadata?.deletionTimestamp || claimed.has(p.metadata?.name ?? '')) continue;
        const why = podProblem(p, s.manifests ? Number(gpuOf(s.manifests)) : 1);
        if (why) {
          problem = why;
          unschedulable = /cannot be scheduled|no node has/.test(why);
          break;
        }
      }
    }
    if (!problem) return;
    const now = Date.now();
    for (const w of [...s.waiters]) {
      if (unschedulable && now - w.since < unschedulableGraceMs) {
        setTimeout(() => settle(s), unschedulableGraceMs - (now - w.since) + 10).unref();
        continue;
      }
      s.waiters.splice(s.waiters.indexOf(w), 1);
      w.reject(new KubernetesProvisionError(problem, false));
    }
    requestScale(s);
  }

  const gpuOf = (m: Manifests): string => {
    const spec = (m.deployment as { spec: { template: { spec: { containers: { resources: { limits: Record<string, string> } }[] } } } }).spec;
    return spec.template.spec.containers[0]?.resources.limits['nvidia.com/gpu'] ?? '1';
  };

  pods.on('add', (p) => onPod(p));
  pods.on('update', (p) => onPod(p));
  pods.on('delete', (p) => {
    const name = p.metadata?.name ?? '';
    const id = deploymentIdOf(p);
    for (const resolve of goneWaiters.get(name) ?? []) resolve();
    goneWaiters.delete(name);
    const wasStopping = stopping.delete(name);
    const s = id ? states.get(id) : undefined;
    if (!s || !id) return;
    if (s.claims.delete(name) && !wasStopping) {
      // Evicted, preempted or deleted by someone: the reconciler finds it unhealthy and replaces it. The
      // count is left alone, so the ReplicaSet's replacement pod is what that next start picks up.
      log.warn({ deploymentId: id, pod: name }, 'a Kubernetes replica pod went away');
      for (const l of exitListeners) l(id);
    }
    settle(s);
  });
  function onPod(p: V1Pod): void {
    const id = deploymentIdOf(p);
    const s = id ? states.get(id) : undefined;
    if (!s || !id) return;
    const name = p.metadata?.name ?? '';
    if (s.claims.has(name) && !podReady(p) && !stopping.has(name)) for (const l of exitListeners) l(id);
    settle(s);
  }
  deployments.on('add', (d) => onDeployment(d));
  deployments.on('update', (d) => onDeployment(d));
  function onDeployment(d: V1Deployment): void {
    const id = deploymentIdOf(d);
    const s = id ? states.get(id) : undefined;
    if (s) settle(s);
  }

  const podsSynced = keepRunning('pods', pods);
  const deploymentsSynced = keepRunning('deployments', deployments);
  const synced = () => Promise.all([podsSynced, deploymentsSynced]).then(() => undefined);
  let isSynced = false;
  void synced().then(() => (isSynced = true));
  /** Synced, or why not: the list error, the caller's abort, or a timeout. */
  async function ready(signal: AbortSignal | undefined, timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    let rejectNow: ((err: Error) => void) | undefined;
    const failed = new Promise<never>((_, reject) => {
      rejectNow = reject;
      readyRejects.add(reject);
      const fail = () =>
        reject(
          listErrors.get('pods') ?? listErrors.get('deployments') ?? new Error(`the Kubernetes API did not answer within ${Math.round(timeoutMs / 1000)} s`),
        );
      timer = setTimeout(fail, timeoutMs);
      timer.unref();
      signal?.addEventListener('abort', () => reject(new Error('provisioning was cancelled')), { once: true });
    });
    failed.catch(() => undefined);
    try {
      await Promise.race([synced(), failed]);
    } finally {
      clearTimeout(timer);
      if (rejectNow) readyRejects.delete(rejectNow);
    }
  }

  /** Server-side apply of the Deployment (without replicas: the scale subresource owns them) and the Service. */
  async function ensureApplied(s: DeploymentState, m: Manifests): Promise<void> {
    const hash = createHash('sha256')
      .update(JSON.stringify([m.deployment, m.service]))
      .digest('hex');
    s.manifests = m;
    if (s.appliedHash === hash) return;
    const name = objectName(s.id);
    try {
      await apps.patchNamespacedDeployment({ name, namespace, body: m.deployment, fieldManager: FIELD_MANAGER, force: true }, apply);
    } catch (err) {
      throw describeApiError(err, `apply the Deployment ${name}`, namespace);
    }
    try {
      await core.patchNamespacedService({ name, namespace, body: m.service, fieldManager: FIELD_MANAGER, force: true }, apply);
    } catch (err) {
      throw describeApiError(err, `apply the Service ${name}`, namespace);
    }
    s.appliedHash = hash;
  }

  /** Sets the Deployment's replicas to the starts waiting plus the pods serving, through the scale subresource (read, then write at that resourceVersion). */
  function requestScale(s: DeploymentState): void {
    s.scaling = s.scaling
      .then(async () => {
        const name = objectName(s.id);
        for (let attempt = 0; attempt < 5 && !closed && !handingOver; attempt++) {
          const want = slots(s);
          try {
            const scale = await apps.readNamespacedDeploymentScale({ name, namespace });
            if (scale.spec?.replicas === want) {
              s.lastScaled = want;
              return;
            }
            await apps.replaceNamespacedDeploymentScale({
              name,
              namespace,
              fieldManager: FIELD_MANAGER,
              body: {
                apiVersion: 'autoscaling/v1',
                kind: 'Scale',
                metadata: { name, namespace, resourceVersion: scale.metadata?.resourceVersion },
                spec: { replicas: want },
              },
            });
            s.lastScaled = want;
            return;
          } catch (err) {
            const code = apiStatus(err);
            if (code === 409) continue; // someone wrote in between: read again
            if (code === 404 && s.manifests && want > 0) {
              s.appliedHash = undefined; // deleted behind our back: apply again, then scale
              try {
                await ensureApplied(s, s.manifests);
                continue;
              } catch (again) {
                failWaiters(s, again);
                return;
              }
            }
            if (code === 404) return; // nothing to scale down
            failWaiters(s, describeApiError(err, `scale the Deployment ${name}`, namespace));
            return;
          }
        }
      })
      .catch((err: unknown) => log.warn({ err, deploymentId: s.id }, 'scaling a Kubernetes Deployment failed'));
  }

  function failWaiters(s: DeploymentState, err: unknown): void {
    const e = err instanceof Error ? err : new Error(String(err));
    for (const w of s.waiters.splice(0)) w.reject(e);
  }

  /** The pod behind a replica row: a claim of this process, else (a row of an earlier process) the ready pod at that address. */
  function podFor(ref: ReplicaRef): V1Pod | undefined {
    const s = states.get(ref.deploymentId);
    for (const [name, url] of s?.claims ?? []) if (url === ref.url) return pods.get(name, namespace);
    if (!s && addressMode === 'service') return undefined;
    return pods
      .list(namespace)
      .find(
        (p) =>
          deploymentIdOf(p) === ref.deploymentId &&
          p.status?.podIP &&
          ref.url === urlOf(s ?? state(ref.deploymentId), p) &&
          !stopping.has(p.metadata?.name ?? ''),
      );
  }

  async function start(spec: ReplicaSpec, signal?: AbortSignal): Promise<StartedReplica> {
    if (closed) throw new Error('the Kubernetes provisioner is closed');
    // Its slot counts from now: a sweep or a stop that sizes the Deployment while this start applies the manifests
    // must not scale away the pod it is about to take.
    const reservation = state(spec.deploymentId);
    reservation.reserved++;
    let reserved = true;
    const unreserve = (): void => {
      if (!reserved) return;
      reserved = false;
      reservation.reserved--;
    };
    try {
      return await startReserved(spec, unreserve, signal);
    } finally {
      unreserve();
    }
  }

  async function startReserved(spec: ReplicaSpec, unreserve: () => void, signal?: AbortSignal): Promise<StartedReplica> {
    const info = await lookup(spec.deploymentId);
    if (!info) throw new KubernetesProvisionError('the deployment or its catalog entry is gone', true);
    const manifests = buildManifests(
      {
        namespace,
        deploymentId: spec.deploymentId,
        tenantId: spec.tenantId,
        entryId: info.entryId,
        servedModel: spec.servedModel,
        entryName: spec.entryName,
        gpuCount: Math.max(1, info.gpuCount),
        coldStartSeconds: info.coldStartSeconds ?? spec.coldStartSeconds,
        contextLength: info.contextLength ?? spec.contextLength ?? null,
        config: info.runtimeConfig,
      },
      defaults,
    );
    const s = state(spec.deploymentId);
    const listError = listErrors.get('pods') ?? listErrors.get('deployments');
    if (listError) throw listError;
    await ready(signal, 30_000);
    await ensureApplied(s, manifests);
    if (signal?.aborted) throw new Error('provisioning was cancelled');
    const pod = await new Promise<V1Pod>((resolve, reject) => {
      const w: Waiter = { replicaId: spec.replicaId, since: Date.now(), resolve, reject };
      s.waiters.push(w);
      unreserve(); // the waiter holds the slot now
      signal?.addEventListener(
        'abort',
        () => {
          const i = s.waiters.indexOf(w);
          if (i < 0) return;
          s.waiters.splice(i, 1);
          requestScale(s);
          reject(new Error('provisioning was cancelled'));
        },
        { once: true },
      );
      requestScale(s);
      settle(s);
    });
    const url = urlOf(s, pod);
    log.info({ deploymentId: spec.deploymentId, replicaId: spec.replicaId, pod: pod.metadata?.name, url }, 'Kubernetes replica pod ready');
    return { url, kind: manifests.runtimeKind, servedModel: spec.servedModel };
  }

  async function stop(ref: ReplicaRef): Promise<void> {
    const s = states.get(ref.deploymentId) ?? state(ref.deploymentId);
    const pod = podFor(ref);
    const name = pod?.metadata?.name;
    if (!pod || !name) return;
    s.claims.delete(name);
    stopping.add(name);
    const gone = new Promise<void>((resolve) => goneWaiters.set(name, [...(goneWaiters.get(name) ?? []), resolve]));
    try {
      // Kubernetes' own way to say which pod a scale-down should remove.
      await core.patchNamespacedPod(
        { name, namespace, body: { metadata: { annotations: { [POD_DELETION_COST]: '-2147483648' } } }, fieldManager: FIELD_MANAGER },
        merge,
      );
    } catch (err) {
      if (apiStatus(err) !== 404)
        log.warn({ err: describeApiError(err, `mark pod ${name} for removal`, namespace).message }, 'Kubernetes pod annotation failed');
    }
    requestScale(s);
    await s.scaling;
    // The ReplicaSet removes not-ready pods before ready ones whatever their cost; deleting the pod
    // itself makes sure this one goes (a pod it removed instead is replaced, since the count holds).
    try {
      await core.deleteNamespacedPod({ name, namespace });
    } catch (err) {
      if (apiStatus(err) !== 404) log.warn({ err: describeApiError(err, `delete pod ${name}`, namespace).message }, 'Kubernetes pod deletion failed');
    }
    if (!pods.get(name, namespace)) return;
    const graceMs = ((pod.spec?.terminationGracePeriodSeconds ?? 30) + 30) * 1000;
    await Promise.race([gone, sleep(graceMs)]);
  }

  return Object.freeze({
    kind: 'kubernetes' as const,
    billsGpuTime: true,
    outlivesControlPlane: true,
    synced,
    start,
    stop,
    async health(ref: ReplicaRef): Promise<boolean> {
      try {
        await ready(undefined, 10_000);
      } catch {
        // The API is unreachable (e.g. at a control-plane restart): the pods most likely still serve; keep the
        // row until the watch can tell.
        return true;
      }
      const pod = podFor(ref);
      if (!pod || !podReady(pod)) return false;
      const s = state(ref.deploymentId);
      const name = pod.metadata?.name ?? '';
      // A ready row of an earlier control-plane process: this process now answers for its pod.
      if (!s.claims.has(name)) s.claims.set(name, ref.url);
      return true;
    },
    seen(ref: ReplicaRef): boolean {
      const pod = isSynced ? podFor(ref) : undefined;
      return pod !== undefined && podReady(pod);
    },
    handOver(handedOver: boolean): void {
      handingOver = handedOver;
    },
    onExit(listener: (deploymentId: string) => void): void {
      exitListeners.push(listener);
    },
    async release(deploymentId: string): Promise<void> {
      await deleteOwned(deploymentId);
    },
    async sweep(activeDeploymentIds: readonly string[]): Promise<void> {
      // Only from a synced cache: never hold up the reconciler's sweep for an unreachable API.
      if (!isSynced) return;
      const keep = new Set(activeDeploymentIds);
      for (const d of deployments.list(namespace)) {
        const id = deploymentIdOf(d);
        if (!id || !owned(d)) continue;
        if (keep.has(id)) {
          // The reconciler has just checked every replica row (adopting healthy pods): pods beyond the
          // starts and replicas it knows of (someone scaled by hand, rows lost in a crash) only burn GPUs.
          const s = state(id);
          if ((d.spec?.replicas ?? 0) !== slots(s)) requestScale(s);
          continue;
        }
        const s = states.get(id);
        if (s && slots(s) > 0) continue; // starting right now: its row may be newer than the list
        await deleteOwned(id);
      }
    },
    async close(): Promise<void> {
      closed = true;
      for (const s of states.values()) failWaiters(s, new Error('the control plane is shutting down'));
      await pods.stop();
      await deployments.stop();
    },
  });

  /** Deletes the deployment's Deployment and Service, each only if it carries this control plane's label. */
  async function deleteOwned(deploymentId: string): Promise<void> {
    const name = objectName(deploymentId);
    const s = states.get(deploymentId);
    if (s) failWaiters(s, new Error('the deployment was removed'));
    states.delete(deploymentId);
    try {
      const d = await apps.readNamespacedDeployment({ name, namespace });
      if (owned(d) && deploymentIdOf(d) === deploymentId) await apps.deleteNamespacedDeployment({ name, namespace, propagationPolicy: 'Background' });
    } catch (err) {
      if (apiStatus(err) !== 404) log.warn({ err: describeApiError(err, `delete the Deployment ${name}`, namespace).message }, 'Kubernetes cleanup failed');
    }
    try {
      const svc = await core.readNamespacedService({ name, namespace });
      if (owned(svc) && deploymentIdOf(svc) === deploymentId) await core.deleteNamespacedService({ name, namespace });
    } catch (err) {
      if (apiStatus(err) !== 404) log.warn({ err: describeApiError(err, `delete the Service ${name}`, namespace).message }, 'Kubernetes cleanup failed');
    }
  }
}

/** Loads credentials: a kubeconfig file when given, else the pod's service account (in-cluster). */
export function loadKubeConfig(kubeconfigPath: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromCluster();
  return kc;
}
