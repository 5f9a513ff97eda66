import type { Db } from '../../db.ts';
import {
  findDeploymentById, findRuntimeInfo, listActiveDeploymentIds, listReplicas, registerReplica, removeReplica, setReplicaState,
  transitionDeployment, type Deployment, type Replica,
} from './deployment-store.ts';
import type { Provisioner, ProvisionerKind, Provisioners, ReplicaSpec } from './provisioners/provisioner.ts';

export interface DeploymentLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Brings each deployment's replicas to what its row asks for; one run at a time per deployment. */
export interface Reconciler {
  /** Queues a reconcile of one deployment (runs coalesce); resolves when that run has finished. */
  schedule(deploymentId: string): Promise<void>;
  /** Runs `fn` after, and before any later, reconcile of the deployment. */
  exclusive<T>(deploymentId: string, fn: () => Promise<T>): Promise<T>;
  /** Resolves when the deployment (or, without an id, every deployment) has no run queued or in flight. */
  settled(deploymentId?: string): Promise<void>;
  /** Reconciles every provisioning or running deployment (control-plane start-up). */
  reconcileAll(): Promise<void>;
  /** Cancels starts in flight and stops every replica the provisioners started (shutdown). */
  close(): Promise<void>;
}

interface ReconcilerDeps {
  readonly db: Db;
  readonly provisioners: Provisioners;
  readonly log: DeploymentLog;
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** External deployments are one URL, so one replica; local ones run `minReplicas`. */
const desiredReplicas = (d: Deployment): number => (d.provisioner === 'external' ? Math.min(d.minReplicas, 1) : d.minReplicas);

export function createReconciler({ db, provisioners, log }: ReconcilerDeps): Reconciler {
  const tails = new Map<string, Promise<unknown>>();
  const queued = new Map<string, Promise<void>>();
  const abort = new AbortController();

  function chain<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const run = (tails.get(id) ?? Promise.resolve()).catch(() => undefined).then(fn);
    tails.set(id, run);
    void run.catch(() => undefined).finally(() => {
      if (tails.get(id) === run) tails.delete(id);
    });
    return run;
  }

  async function retire(provisioner: Provisioner | undefined, r: Replica): Promise<void> {
    await provisioner?.stop(r).catch((err: unknown) => log.warn({ err, replicaId: r.id }, 'stopping a replica failed'));
    await removeReplica(db, r.id).catch(() => undefined); // already gone with its deployment
  }

  async function startOne(d: Deployment, provisioner: Provisioner, spec: ReplicaSpec): Promise<void> {
    const started = await provisioner.start(spec, abort.signal);
    try {
      await registerReplica(db, {
        deploymentId: d.id, url: started.url, kind: started.kind, servedModel: started.servedModel, state: 'ready',
        pid: started.pid ?? null, port: started.port ?? null,
      });
      log.info({ deploymentId: d.id, url: started.url }, 'replica ready');
    } catch (err) {
      // Deleted while it started: nothing may keep running for it.
      await provisioner.stop({ deploymentId: d.id, url: started.url, pid: started.pid ?? null, port: started.port ?? null });
      throw err;
    }
  }

  async function reconcileOnce(id: string): Promise<void> {
    if (abort.signal.aborted) return;
    const d = await findDeploymentById(db, id);
    if (!d) return; // deleted: deleteDeployment stopped its replicas
    const provisioner = provisioners[d.provisioner as ProvisionerKind];
    const active = d.state === 'provisioning' || d.state === 'running';
    const replicas = await listReplicas(db, id);
    if (!provisioner) {
      for (const r of replicas) await retire(undefined, r);
      if (active) {
        await transitionDeployment(db, { deploymentId: id, from: [d.state], to: 'failed', lastError: `the ${d.provisioner} provisioner is not available on this control plane` });
      }
      return;
    }

    const live: Replica[] = [];
    for (const r of replicas) {
      const ok = active && (r.state === 'ready' || r.state === 'starting') && (await provisioner.health(r));
      if (ok) live.push(r);
      else await retire(provisioner, r);
    }
    if (!active) return;

    const desired = desiredReplicas(d);
    while (live.length > desired) {
      const extra = live.pop();
      if (extra) await retire(provisioner, extra); // newest first
    }
    for (const r of live) if (r.state !== 'ready') await setReplicaState(db, r.id, 'ready');

    const info = await findRuntimeInfo(db, d.entryId);
    const spec: ReplicaSpec = {
      deploymentId: d.id, tenantId: d.tenantId, entryName: d.entryName, servedModel: info?.servedModel ?? d.entryName,
      coldStartSeconds: info?.coldStartSeconds ?? null, externalUrl: d.externalUrl,
    };
    const missing = Math.max(0, desired - live.length);
    const results = await Promise.allSettled(Array.from({ length: missing }, () => startOne(d, provisioner, spec)));
    const errors = results.flatMap((r) => (r.status === 'rejected' ? [errorText(r.reason)] : []));
    const ready = live.length + results.length - errors.length;
    if (errors.length > 0) log.warn({ deploymentId: id, errors }, 'some replicas did not start');
    if (abort.signal.aborted) return;

    if (ready > 0 || desired === 0) {
      await transitionDeployment(db, { deploymentId: id, from: ['provisioning'], to: 'running' });
    } else {
      const lastError = [...new Set(errors)].join('; ') || 'no replica could be started';
      await transitionDeployment(db, { deploymentId: id, from: ['provisioning', 'running'], to: 'failed', lastError });
      log.warn({ deploymentId: id, lastError }, 'deployment failed');
    }
  }

  function schedule(id: string): Promise<void> {
    if (abort.signal.aborted) return Promise.resolve();
    const pending = queued.get(id);
    if (pending) return pending;
    const run = chain(id, async () => {
      queued.delete(id);
      try {
        await reconcileOnce(id);
      } catch (err) {
        log.error({ err, deploymentId: id }, 'reconcile failed');
      }
    });
    queued.set(id, run);
    return run;
  }

  for (const p of Object.values(provisioners)) p?.onExit?.((deploymentId) => {
    log.warn({ deploymentId }, 'a replica exited; replacing it');
    void schedule(deploymentId);
  });

  async function settled(id?: string): Promise<void> {
    for (;;) {
      const pending = id === undefined ? [...tails.values()] : [tails.get(id)].filter((p) => p !== undefined);
      if (pending.length === 0) return;
      await Promise.allSettled(pending);
    }
  }

  return Object.freeze({
    schedule,
    exclusive: chain,
    settled,
    async reconcileAll(): Promise<void> {
      const ids = await listActiveDeploymentIds(db);
      if (ids.length > 0) log.info({ deployments: ids.length }, 'reconciling deployments');
      await Promise.all(ids.map(schedule));
    },
    async close(): Promise<void> {
      abort.abort();
      await settled();
      await Promise.all(Object.values(provisioners).map((p) => p?.close?.()));
    },
  });
}
