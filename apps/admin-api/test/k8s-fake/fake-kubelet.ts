// The cluster behind the fake API server: a Deployment controller (pods for spec.replicas, the
// ReplicaSet's deletion order, status, ReplicaFailure on quota), the garbage collector (a deleted
// Deployment's pods go) and a kubelet (schedule, pull, run, probe ready, graceful termination), each
// writing through the store like the real controllers do. Failures are switched on per Deployment.
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FakeApiServer, Resource } from './fake-apiserver.ts';

type Obj = Parameters<FakeApiServer['put']>[1];
export type PodFailure = 'unschedulable' | 'image-pull' | 'crash';

export interface FakeKubeletOptions {
  /** Time from pod creation to Ready (without a runtime process; default 30 ms). */
  readonly readyMs?: number;
  /** Time a deleted pod takes to terminate (default 30 ms). */
  readonly terminationMs?: number;
  /** Start a runtime-sim process per pod on its pod IP (127.0.0.x) and container port; Ready when /health answers. */
  readonly runtimeSim?: boolean;
  /** Pod IPs are 127.<subnet>.x.y so runtime-sim can bind them (default random). */
  readonly subnet?: number;
}

const CPM = 'kube-controller-manager';

export class FakeKubelet {
  private readonly api: FakeApiServer;
  private readonly opts: FakeKubeletOptions;
  private readonly failures = new Map<string, PodFailure>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly processes = new Map<string, ChildProcess>();
  private readonly terminating = new Set<string>();
  private nextIp = 2;
  private pending = false;
  private closed = false;
  private readonly subnet: number;
  /** Total nvidia.com/gpu the namespace's ResourceQuota allows (undefined: none). */
  gpuQuota: number | undefined;
  /** Pods ever created, by name, with their creation and deletion times (for GPU-time checks). */
  readonly podLog = new Map<string, { deployment: string; createdAt: number; readyAt?: number; deletedAt?: number }>();

  constructor(api: FakeApiServer, opts: FakeKubeletOptions = {}) {
    this.api = api;
    this.opts = opts;
    this.subnet = opts.subnet ?? 100 + Math.floor(Math.random() * 150);
    api.onChange((resource, type, obj) => this.changed(resource, type, obj));
  }

  /** Pods of this Deployment (or '*') now fail this way; null heals. */
  setFailure(deployment: string, failure: PodFailure | null): void {
    if (failure) this.failures.set(deployment, failure);
    else this.failures.delete(deployment);
    // The scheduler retries pending pods (a node was added): ones stuck unschedulable get placed now.
    for (const ns of this.api.namespaces) {
      for (const p of this.api.list('pods', ns)) {
        const st = p.status as { conditions?: { type: string; reason?: string }[] };
        const stuck = st.conditions?.some((c) => c.type === 'PodScheduled' && c.reason === 'Unschedulable');
        const owner = p.metadata.name.replace(/-7d9f8c6b5-[a-z0-9]+$/, '');
        if (stuck && !p.metadata.deletionTimestamp && !(this.failures.get(owner) ?? this.failures.get('*'))) this.runPod(owner, p.metadata.name, ns);
      }
    }
    this.kick();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    await Promise.all(
      [...this.processes.values()].map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            p.once('exit', () => resolve());
            p.kill('SIGKILL');
          }),
      ),
    );
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.closed) fn();
    }, ms);
    this.timers.add(t);
  }

  private changed(resource: Resource, type: string, obj: Obj): void {
    if (this.closed) return;
    if (resource === 'deployments' && type === 'DELETED') {
      // Garbage collector, background propagation.
      for (const p of this.podsOf(obj, true)) this.deletePod(p);
    }
    if (resource === 'pods' && type === 'MODIFIED' && obj.metadata.deletionTimestamp) this.terminate(obj);
    this.kick();
  }

  private kick(): void {
    if (this.pending || this.closed) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      if (!this.closed) for (const ns of this.api.namespaces) for (const d of this.api.list('deployments', ns)) this.reconcile(d);
    });
  }

  private podsOf(d: Obj, includeTerminating = false): Obj[] {
    const sel = (d.spec as { selector?: { matchLabels?: Record<string, string> } } | undefined)?.selector?.matchLabels ?? {};
    const selector = Object.entries(sel)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    if (!selector) return [];
    return this.api.list('pods', d.metadata.namespace, selector).filter((p) => includeTerminating || !p.metadata.deletionTimestamp);
  }

  private gpusOf(p: Obj): number {
    const c = (p.spec as { containers?: { resources?: { limits?: Record<string, string> } }[] }).containers ?? [];
    return c.reduce((n, x) => n + Number(x.resources?.limits?.['nvidia.com/gpu'] ?? 0), 0);
  }

  private reconcile(d: Obj): void {
    const spec = d.spec as { replicas?: number; template: { metadata?: { labels?: Record<string, string> }; spec: Record<string, unknown> } };
    const want = spec.replicas ?? 1;
    const pods = this.podsOf(d);
    let failure: string | null = null;
    for (let i = pods.length; i < want; i++) {
      const name = `${d.metadata.name}-7d9f8c6b5-${Math.random().toString(36).slice(2, 7)}`;
      const pod: Obj = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          namespace: d.metadata.namespace,
          labels: { ...(spec.template.metadata?.labels ?? {}), 'pod-template-hash': '7d9f8c6b5' },
          creationTimestamp: new Date().toISOString(),
          uid: crypto.randomUUID(),
        },
        spec: structuredClone(spec.template.spec),
        status: { phase: 'Pending', conditions: [] },
      };
      if (this.gpuQuota !== undefined) {
        const used = this.api
          .list('pods', d.metadata.namespace)
          .filter((p) => !p.metadata.deletionTimestamp)
          .reduce((n, p) => n + this.gpusOf(p), 0);
        const req = this.gpusOf(pod);
        if (used + req > this.gpuQuota) {
          failure = `pods "${name}" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=${req}, used: requests.nvidia.com/gpu=${used}, limited: requests.nvidia.com/gpu=${this.gpuQuota}`;
          break;
        }
      }
      this.api.put('pods', pod, CPM);
      this.podLog.set(name, { deployment: d.metadata.name, createdAt: Date.now() });
      this.runPod(d.metadata.name, name, d.metadata.namespace);
    }
    if (pods.length > want) {
      // The ReplicaSet's order: unscheduled, pending, not ready, lower pod-deletion-cost, newer first.
      const rank = (p: Obj) => {
        const st = p.status as { phase?: string; conditions?: { type: string; status: string }[] };
        const scheduled = !!(p.spec as { nodeName?: string }).nodeName;
        const ready = st.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
        const cost = Number(p.metadata.annotations?.['controller.kubernetes.io/pod-deletion-cost'] ?? 0);
        return [scheduled ? 1 : 0, st.phase === 'Running' ? 1 : 0, ready ? 1 : 0, cost, -Date.parse(String(p.metadata.creationTimestamp))];
      };
      const sorted = [...pods].sort((a, b) => {
        const ra = rank(a);
        const rb = rank(b);
        for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return (ra[i] ?? 0) - (rb[i] ?? 0);
        return 0;
      });
      for (const p of sorted.slice(0, pods.length - want)) this.deletePod(p);
    }
    // Deployment status, as the deployment controller writes it.
    const now = this.podsOf(d);
    const ready = now.filter((p) =>
      (p.status as { conditions?: { type: string; status: string }[] }).conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    ).length;
    const old = d.status as { replicas?: number; readyReplicas?: number; conditions?: { type: string; message?: string }[] } | undefined;
    const conditions = failure
      ? [
          {
            type: 'ReplicaFailure',
            status: 'True',
            reason: 'FailedCreate',
            message: failure,
            lastUpdateTime: new Date().toISOString(),
            lastTransitionTime: new Date().toISOString(),
          },
        ]
      : [];
    const oldFailure = old?.conditions?.find((c) => c.type === 'ReplicaFailure')?.message ?? null;
    if (old?.replicas !== now.length || (old?.readyReplicas ?? 0) !== ready || oldFailure !== (failure ?? null)) {
      const fresh = this.api.get('deployments', d.metadata.namespace, d.metadata.name);
      if (!fresh) return;
      fresh.status = {
        observedGeneration: fresh.metadata.generation,
        replicas: now.length,
        readyReplicas: ready,
        availableReplicas: ready,
        updatedReplicas: now.length,
        conditions,
      };
      this.api.put('deployments', fresh, CPM);
    }
  }

  private update(namespace: string, name: string, fn: (p: Obj) => void): Obj | undefined {
    const p = this.api.get('pods', namespace, name);
    if (!p || p.metadata.deletionTimestamp) return undefined;
    fn(p);
    return this.api.put('pods', p, 'kubelet');
  }

  private runPod(deployment: string, name: string, namespace: string): void {
    const failure = this.failures.get(deployment) ?? this.failures.get('*');
    if (failure === 'unschedulable') {
      const pod = this.api.get('pods', namespace, name);
      const gpus = pod ? this.gpusOf(pod) : 1;
      this.update(namespace, name, (p) => {
        p.status = {
          phase: 'Pending',
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: `0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod. (requested ${gpus})`,
            },
          ],
        };
      });
      return;
    }
    const ip = `127.${this.subnet}.${Math.floor(this.nextIp / 250)}.${(this.nextIp % 250) + 2}`;
    this.nextIp++;
    this.update(namespace, name, (p) => {
      (p.spec as Record<string, unknown>).nodeName = 'gpu-node-1';
      p.status = { phase: 'Pending', hostIP: '10.0.0.11', conditions: [{ type: 'PodScheduled', status: 'True' }] };
    });
    if (failure === 'image-pull') {
      const image = String(((this.api.get('pods', namespace, name)?.spec as { containers?: { image?: string }[] }).containers ?? [])[0]?.image);
      this.later(5, () =>
        this.update(namespace, name, (p) => {
          p.status = {
            ...(p.status as object),
            containerStatuses: [
              {
                name: 'runtime',
                image,
                ready: false,
                restartCount: 0,
                state: {
                  waiting: { reason: 'ErrImagePull', message: `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": not found` },
                },
              },
            ],
          };
        }),
      );
      this.later(15, () =>
        this.update(namespace, name, (p) => {
          p.status = {
            ...(p.status as object),
            containerStatuses: [
              {
                name: 'runtime',
                image,
                ready: false,
                restartCount: 0,
                state: { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${image}"` } },
              },
            ],
          };
        }),
      );
      return;
    }
    if (failure === 'crash') {
      this.later(5, () =>
        this.update(namespace, name, (p) => {
          p.status = {
            ...(p.status as object),
            phase: 'Running',
            podIP: ip,
            containerStatuses: [
              {
                name: 'runtime',
                ready: false,
                restartCount: 3,
                state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' } },
                lastState: { terminated: { reason: 'Error', exitCode: 1 } },
              },
            ],
          };
        }),
      );
      return;
    }
    const markReady = () =>
      this.update(namespace, name, (p) => {
        p.status = {
          phase: 'Running',
          hostIP: '10.0.0.11',
          podIP: ip,
          podIPs: [{ ip }],
          startTime: new Date().toISOString(),
          conditions: [
            { type: 'PodScheduled', status: 'True' },
            { type: 'Initialized', status: 'True' },
            { type: 'ContainersReady', status: 'True' },
            { type: 'Ready', status: 'True' },
          ],
          containerStatuses: [{ name: 'runtime', ready: true, started: true, restartCount: 0, state: { running: { startedAt: new Date().toISOString() } } }],
        };
        const log = this.podLog.get(name);
        if (log) log.readyAt = Date.now();
      });
    this.later(5, () =>
      this.update(namespace, name, (p) => {
        p.status = {
          ...(p.status as object),
          phase: 'Running',
          podIP: ip,
          podIPs: [{ ip }],
          containerStatuses: [{ name: 'runtime', ready: false, started: false, restartCount: 0, state: { running: { startedAt: new Date().toISOString() } } }],
        };
      }),
    );
    if (!this.opts.runtimeSim) {
      this.later(this.opts.readyMs ?? 30, markReady);
      return;
    }
    const pod = this.api.get('pods', namespace, name);
    const c = ((pod?.spec as { containers?: { args?: string[]; ports?: { containerPort: number }[]; env?: { name: string; value?: string }[] }[] })
      .containers ?? [])[0];
    const port = c?.ports?.[0]?.containerPort ?? 8000;
    const args = c?.args ?? [];
    const served = args[args.indexOf('--served-model-name') + 1] ?? 'model';
    // The window the runtime was started with (vLLM's --max-model-len, SGLang's --context-length), as the real one takes it.
    const windowAt = Math.max(args.lastIndexOf('--max-model-len'), args.lastIndexOf('--context-length'));
    const window = windowAt >= 0 && args[windowAt + 1] !== undefined ? ['--max-context-length', args[windowAt + 1]!] : [];
    const cli = join(dirname(createRequire(import.meta.url).resolve('@infer/runtime-sim')), 'cli.ts');
    // The container's plain env reaches the process, as a kubelet sets it (SIM_COLD_START_MS: a runtime slow to boot).
    const env = Object.fromEntries((c?.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
    const child = spawn(process.execPath, [cli, '--port', String(port), '--host', ip, '--model', served, '--ttft-ms', '5', '--itl-ms', '1', ...window], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    this.processes.set(name, child);
    child.stdout?.resume();
    child.stderr?.resume();
    const poll = async () => {
      for (let i = 0; i < 400 && !this.closed && child.exitCode === null; i++) {
        try {
          const res = await fetch(`http://${ip}:${port}/health`);
          if (res.ok) return markReady();
        } catch {
          // not listening yet
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    void poll();
  }

  private deletePod(p: Obj): void {
    if (p.metadata.deletionTimestamp) return;
    const fresh = this.api.get('pods', p.metadata.namespace, p.metadata.name);
    if (!fresh || fresh.metadata.deletionTimestamp) return;
    fresh.metadata.deletionTimestamp = new Date().toISOString();
    fresh.metadata.deletionGracePeriodSeconds = (fresh.spec as { terminationGracePeriodSeconds?: number }).terminationGracePeriodSeconds ?? 30;
    this.api.put('pods', fresh, CPM); // the MODIFIED event starts terminate()
  }

  private terminate(p: Obj): void {
    if (this.terminating.has(p.metadata.name)) return;
    this.terminating.add(p.metadata.name);
    this.later(this.opts.terminationMs ?? 30, () => {
      this.terminating.delete(p.metadata.name);
      const child = this.processes.get(p.metadata.name);
      this.processes.delete(p.metadata.name);
      child?.kill('SIGTERM');
      const log = this.podLog.get(p.metadata.name);
      if (log) log.deletedAt = Date.now();
      this.api.remove('pods', p.metadata.namespace, p.metadata.name);
    });
  }
}
