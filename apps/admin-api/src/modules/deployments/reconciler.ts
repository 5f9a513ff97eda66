import type { Db } from '../../db.ts';
import {
  findDeploymentById,
  findRuntimeInfo,
  insertStartingReplica,
  listActiveDeploymentIds,
  listReplicas,
  markReplicaDraining,
  markReplicaReady,
  removeReplica,
  setDeploymentError,
  transitionDeployment,
  SERVING_STATES,
  type Deployment,
  type Replica,
} from './deployment-store.ts';
import { adoptReplicaInterval, closeReplicaInterval, openReplicaInterval, switchReplicaPhase } from './gpu-ledger.ts';
import type { Provisioner, ProvisionerKind, Provisioners, ReplicaRef, ReplicaSpec } from './provisioners/provisioner.ts';
import { scrapeRuntimeLoad, type RuntimeLoad } from './runtime-metrics.ts';

export interface DeploymentLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Brings each deployment's replicas to its desired count; one run at a time per deployment. */
export interface Reconciler {
  /** Queues a reconcile of one deployment (runs coalesce); resolves when that run has finished. */
  schedule(deploymentId: string): Promise<void>;
  /** Runs `fn` after, and before any later, reconcile of the deployment. */
  exclusive<T>(deploymentId: string, fn: () => Promise<T>): Promise<T>;
  /** Resolves when the deployment (or every deployment) has no run, start or drain queued or in flight. */
  settled(deploymentId?: string): Promise<void>;
  /** Reconciles every serving deployment, and stops replicas whose rows are gone (deleted elsewhere). */
  reconcileAll(): Promise<void>;
  /**
   * Stops the replicas of a deployment just deleted, after any run in flight and once every node had the drain grace
   * to learn of the deletion: a request the deletion cuts is answered deployment_stopped, not a retryable 502.
   * Resolves when they are stopped (`settled` waits for it too).
   */
  retireDeleted(deploymentId: string, provisioner: Provisioner | undefined, replicas: readonly Replica[]): Promise<void>;
  /** Forgets earlier start failures (a user asked again: scale, start, wake). */
  resetFailures(deploymentId: string): void;
  /**
   * Converges the deployment to at least `n` replicas (within its maximum) until the returned function is called:
   * a wake starts its replica before its scale decision is recorded, and no pass in between may cancel that start.
   */
  holdAtLeast(deploymentId: string, n: number): () => void;
  /** Ready or draining replicas this process runs, by id (the ledger's heartbeat and phases). */
  ownedReplicas(): ReadonlyMap<string, OwnedReplica>;
  /**
   * The runtime gauges of a replica this process runs (null: unknown replica, no metrics, or refused).
   * Tenant-given addresses are scraped by their provisioner through its address guard.
   */
  runtimeLoad(replicaId: string, timeoutMs: number): Promise<RuntimeLoad | null>;
  /** Every replica this process is starting, running or draining (their ledger intervals are alive). */
  liveReplicaIds(): string[];
  /**
   * Leadership lost, maybe for a moment: stops acting (starts and drains under way are cancelled) while the replicas
   * this process runs keep serving, for a leadership regained soon (`relinquish` stops them).
   */
  pause(): Promise<void>;
  /**
   * Leadership lost for good: stops every replica this process runs, except those that outlive it (handed over to the
   * next leader as they are); the reconciler may be used again later.
   */
  relinquish(): Promise<void>;
  /** Shutdown: cancels starts in flight and stops the replicas the provisioners started, except those handed over. */
  close(): Promise<void>;
}

export interface OwnedReplica {
  readonly id: string;
  readonly deploymentId: string;
  readonly url: string;
  readonly metered: boolean;
  /** True once it left the routing snapshot. */
  draining: boolean;
}

export interface ReconcilerOptions {
  /** A replica not ready this long after its start is replaced (default 120 s plus the simulated cold start). */
  readonly startTimeoutMs?: number;
  /** Consecutive failed starts before the deployment stops retrying and reports why (default 3). */
  readonly maxStartAttempts?: number;
  /**
   * Wait before the next start after a failed one: this, doubled with each failure in a row, at most 30 s (default
   * 2 s). A runtime that crashes at boot for a moment (a node's hiccup, a registry blip) does not use up every attempt
   * within a second and fail the deployment.
   */
  readonly startRetryBackoffMs?: number;
  /** After a replica leaves the snapshot, time for every node to apply that (default 1 s). */
  readonly drainGraceMs?: number;
  /** Longest wait for a draining replica's in-flight requests (default 30 s). */
  readonly drainTimeoutMs?: number;
  /** Only the leader acts; a follower's schedule() is a no-op (default: always leader). */
  readonly isLeader?: () => boolean;
  /** In-flight requests the nodes report for a deployment (drain fallback when a runtime has no metrics). */
  readonly reportedInFlight?: (deploymentId: string) => number | undefined;
}

interface ReconcilerDeps {
  readonly db: Db;
  readonly provisioners: Provisioners;
  readonly log: DeploymentLog;
  readonly options?: ReconcilerOptions;
}

interface StartTask {
  readonly deploymentId: string;
  readonly abort: AbortController;
  readonly done: Promise<void>;
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

/** The replica count the deployment converges to: desired within [min, max]; an external URL is one replica. */
export function targetReplicas(d: Pick<Deployment, 'desiredReplicas' | 'minReplicas' | 'maxReplicas' | 'provisioner'>): number {
  const n = Math.min(Math.max(d.desiredReplicas, d.minReplicas), d.maxReplicas);
  return d.provisioner === 'external' ? Math.min(n, 1) : n;
}

export function createReconciler({ db, provisioners, log, options = {} }: ReconcilerDeps): Reconciler {
  const startTimeoutMs = options.startTimeoutMs ?? 120_000;
  const maxStartAttempts = Math.max(1, options.maxStartAttempts ?? 3);
  const drainGraceMs = options.drainGraceMs ?? 1_000;
  const drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
  const isLeader = options.isLeader ?? (() => true);
  const tails = new Map<string, Promise<unknown>>();
  const queued = new Map<string, Promise<void>>();
  const starts = new Map<string, StartTask>();
  const drains = new Map<string, { deploymentId: string; done: Promise<void> }>();
  /** Replicas of deleted deployments waiting out the drain grace (`retireDeleted`): the sweep leaves them be. */
  const retiring = new Set<string>();
  const owned = new Map<string, OwnedReplica & { ref: ReplicaRef; provisioner: Provisioner }>();
  const failures = new Map<string, number>();
  const startRetryBackoffMs = options.startRetryBackoffMs ?? 2_000;
  /** Deployments whose last start failed: no start before this time (Date.now()), and the timer that reconciles then. */
  const backoffs = new Map<string, { readonly until: number; readonly timer: NodeJS.Timeout }>();
  const floors = new Map<string, Set<{ readonly n: number }>>();
  let abort = new AbortController();
  let closed = false;

  function chain<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const run = (tails.get(id) ?? Promise.resolve()).catch(() => undefined).then(fn);
    tails.set(id, run);
    void run
      .catch(() => undefined)
      .finally(() => {
        if (tails.get(id) === run) tails.delete(id);
      });
    return run;
  }

  async function stopOwned(replicaId: string): Promise<void> {
    const o = owned.get(replicaId);
    if (!o) return;
    owned.delete(replicaId);
    await o.provisioner.stop(o.ref).catch((err: unknown) => log.warn({ err, replicaId }, 'stopping a replica failed'));
  }

  /** Stops a replica (whoever's row it is) and forgets it: row gone, ledger interval closed. */
  async function retire(provisioner: Provisioner | undefined, r: Replica): Promise<void> {
    starts.get(r.id)?.abort.abort();
    if (owned.has(r.id)) await stopOwned(r.id);
    else await provisioner?.stop(r).catch((err: unknown) => log.warn({ err, replicaId: r.id }, 'stopping a replica failed'));
    await closeReplicaInterval(db, r.id).catch((err: unknown) => log.warn({ err, replicaId: r.id }, 'closing a GPU-time interval failed'));
    await removeReplica(db, r.id).catch(() => undefined); // already gone with its deployment
  }

  /**
   * A ready replica an earlier leader started, still healthy (a pod or URL that outlives its control plane): this
   * process runs it from now on, so it drains before it stops, its gauges count, and its GPU time is billed again from
   * now (the earlier leader's interval ended at its last heartbeat: the time between is unproven, not billed).
   */
  async function adopt(d: Deployment, provisioner: Provisioner, r: Replica): Promise<void> {
    // Billed only once the provisioner has seen it up itself (not assumed while it cannot tell); routed meanwhile.
    if (provisioner.seen?.(r) === false) return;
    if (provisioner.billsGpuTime) {
      await adoptReplicaInterval(db, { replicaId: r.id, deploymentId: d.id, tenantId: d.tenantId, entryId: d.entryId, gpuCount: d.gpuCount ?? 1 });
    }
    owned.set(r.id, { id: r.id, deploymentId: d.id, url: r.url, metered: provisioner.billsGpuTime, draining: false, ref: r, provisioner });
    log.info({ deploymentId: d.id, replicaId: r.id, url: r.url }, 'adopted a replica an earlier leader started');
  }

  /** No start for the deployment until the backoff after its `n`th failure in a row has passed; then a pass. */
  function backOff(deploymentId: string, n: number): void {
    const ms = Math.min(startRetryBackoffMs * 2 ** (n - 1), 30_000);
    if (ms <= 0) return;
    clearBackoff(deploymentId);
    const timer = setTimeout(() => {
      backoffs.delete(deploymentId);
      void schedule(deploymentId);
    }, ms);
    timer.unref();
    backoffs.set(deploymentId, { until: Date.now() + ms, timer });
  }

  function clearBackoff(deploymentId: string): void {
    const b = backoffs.get(deploymentId);
    if (b === undefined) return;
    clearTimeout(b.timer);
    backoffs.delete(deploymentId);
  }

  function launch(d: Deployment, provisioner: Provisioner, base: Omit<ReplicaSpec, 'replicaId'>, row: Replica): void {
    const ac = new AbortController();
    let deadlineHit = false;
    const timer = setTimeout(
      () => {
        deadlineHit = true;
        ac.abort();
      },
      startTimeoutMs + Math.min(base.coldStartSeconds ?? 0, 600) * 1000,
    );
    timer.unref();
    const done = (async () => {
      try {
        const started = await provisioner.start({ ...base, replicaId: row.id }, AbortSignal.any([ac.signal, abort.signal]));
        const ref: ReplicaRef = { deploymentId: d.id, url: started.url, pid: started.pid ?? null, port: started.port ?? null };
        const ready = await markReplicaReady(db, row.id, {
          url: started.url,
          kind: started.kind,
          servedModel: started.servedModel,
          pid: started.pid ?? null,
          port: started.port ?? null,
        }).catch(() => null);
        if (!ready || ac.signal.aborted) {
          // Deleted or retired while it started: nothing may keep running for it.
          await provisioner.stop(ref).catch(() => undefined);
          await closeReplicaInterval(db, row.id).catch(() => undefined);
          return;
        }
        owned.set(row.id, { id: row.id, deploymentId: d.id, url: ready.url, metered: provisioner.billsGpuTime, draining: false, ref, provisioner });
        if (provisioner.billsGpuTime) await switchReplicaPhase(db, row.id, 'idle');
        failures.delete(d.id);
        log.info({ deploymentId: d.id, replicaId: row.id, url: started.url, attempt: row.attempt }, 'replica ready');
      } catch (err) {
        const why = deadlineHit
          ? `the replica was not ready within its start deadline (${Math.round(startTimeoutMs / 1000)} s after its cold start)`
          : errorText(err);
        if (abort.signal.aborted || (ac.signal.aborted && !deadlineHit)) {
          await closeReplicaInterval(db, row.id).catch(() => undefined);
          await removeReplica(db, row.id).catch(() => undefined);
          return; // cancelled (scale-down, stop, shutdown): not a failure
        }
        // A provisioner error marked permanent (RBAC, an invalid manifest) cannot be fixed by retrying: fail now.
        const permanent = !deadlineHit && (err as { permanent?: unknown } | null)?.permanent === true;
        const n = permanent ? maxStartAttempts : (failures.get(d.id) ?? 0) + 1;
        failures.set(d.id, n);
        const lastError = permanent ? `replica start failed: ${why}` : `replica start failed (attempt ${n} of ${maxStartAttempts}): ${why}`;
        log.warn({ deploymentId: d.id, replicaId: row.id, lastError }, 'replica did not start');
        await closeReplicaInterval(db, row.id).catch(() => undefined);
        await removeReplica(db, row.id).catch(() => undefined);
        await setDeploymentError(db, d.id, lastError).catch(() => undefined);
        if (n < maxStartAttempts) backOff(d.id, n);
      } finally {
        clearTimeout(timer);
        starts.delete(row.id);
        if (!abort.signal.aborted) void schedule(d.id);
      }
    })();
    starts.set(row.id, { deploymentId: d.id, abort: ac, done });
  }

  function runtimeLoad(replicaId: string, timeoutMs: number): Promise<RuntimeLoad | null> {
    const o = owned.get(replicaId);
    if (!o) return Promise.resolve(null);
    return o.provisioner.runtimeLoad ? o.provisioner.runtimeLoad(o.ref, timeoutMs).catch(() => null) : scrapeRuntimeLoad(o.url, timeoutMs);
  }

  /** Still busy: the runtime's own gauges when it has them, else the nodes' reports for the deployment. */
  async function busy(r: OwnedReplica): Promise<boolean> {
    const load = await runtimeLoad(r.id, 1_000);
    if (load) return load.running + load.waiting > 0;
    return (options.reportedInFlight?.(r.deploymentId) ?? 0) > 0;
  }

  /** Scale-down without failures: out of the snapshot first, then in-flight requests finish, then stop. */
  async function drain(provisioner: Provisioner, r: Replica): Promise<void> {
    const o = owned.get(r.id);
    if (!o || !(await markReplicaDraining(db, r.id))) {
      await retire(provisioner, r);
      return;
    }
    o.draining = true;
    const done = (async () => {
      try {
        await sleep(drainGraceMs, abort.signal);
        const deadline = Date.now() + drainTimeoutMs;
        while (Date.now() < deadline && !abort.signal.aborted && (await busy(o))) await sleep(100, abort.signal);
        // Cut short by a shutdown or a lost leadership: a replica that outlives this process is left to whoever leads
        // next, which finds its row draining and stops it (a stop here would hold the shutdown up for the pod's end).
        if (abort.signal.aborted && provisioner.outlivesControlPlane === true) return;
        await retire(provisioner, r);
        log.info({ deploymentId: r.deploymentId, replicaId: r.id }, 'replica drained and stopped');
      } finally {
        drains.delete(r.id);
        if (!abort.signal.aborted) void schedule(r.deploymentId);
      }
    })();
    drains.set(r.id, { deploymentId: r.deploymentId, done });
  }

  async function reconcileOnce(id: string): Promise<void> {
    if (abort.signal.aborted || !isLeader()) return;
    // Starts under way before the rows are read: one that ends while this pass awaits (its row read as 'starting',
    // now ready or gone) is not an orphan of an earlier process, and must be neither stopped nor started again.
    const launchedHere = new Set(starts.keys());
    // Both reads at once: a wake's replica start waits on this pass.
    const [d, replicas] = await Promise.all([findDeploymentById(db, id), listReplicas(db, id)]);
    if (!d) {
      // Deleted (maybe by another control-plane replica): stop what this process runs for it.
      for (const t of starts.values()) if (t.deploymentId === id) t.abort.abort();
      for (const o of [...owned.values()])
        if (o.deploymentId === id) {
          await stopOwned(o.id);
          await closeReplicaInterval(db, o.id).catch(() => undefined);
        }
      for (const p of Object.values(provisioners))
        await p?.release?.(id).catch((err: unknown) => log.warn({ err, deploymentId: id }, 'releasing a deployment failed'));
      return;
    }
    const provisioner = provisioners[d.provisioner as ProvisionerKind];
    const active = SERVING_STATES.includes(d.state);
    if (!provisioner) {
      for (const r of replicas) await retire(undefined, r);
      if (active) {
        await transitionDeployment(db, {
          deploymentId: id,
          from: [d.state],
          to: 'failed',
          lastError: `the ${d.provisioner} provisioner is not available on this control plane`,
        });
      }
      return;
    }

    const ready: Replica[] = [];
    let settling = 0;
    const starting: Replica[] = [];
    /** Ready replicas of a deployment stopped or failed: stopped once the nodes had time to learn of it. */
    const halting: Replica[] = [];
    // Every row's health first, and the healthy ones adopted, before any is retired: retiring one before the rest are
    // claimed would size a Kubernetes Deployment to the replicas claimed so far (none, for a new leader) and take
    // healthy pods with it.
    const healthy = new Set<string>();
    for (const r of replicas) if (active && r.state === 'ready' && (await provisioner.health(r))) healthy.add(r.id);
    for (const r of replicas) if (healthy.has(r.id) && !owned.has(r.id) && !starts.has(r.id)) await adopt(d, provisioner, r);
    for (const r of replicas) {
      if (r.state === 'draining' && drains.has(r.id)) continue;
      if (r.state === 'starting' && !starts.has(r.id) && launchedHere.has(r.id)) {
        settling++; // its launch scheduled the next pass, which sees how it ended
        continue;
      }
      if (r.state === 'starting' && starts.has(r.id)) {
        if (active) starting.push(r);
        else await retire(provisioner, r);
        continue;
      }
      // A 'starting' or 'draining' row nobody here works on was left by an earlier process.
      if (healthy.has(r.id)) ready.push(r);
      // A stop marks its replicas 'stopped' with the deployment; one this process runs still serves until the grace ends.
      else if (!active && (r.state === 'ready' || r.state === 'stopped') && owned.has(r.id)) halting.push(r);
      else await retire(provisioner, r);
    }
    if (!active) {
      if (halting.length > 0) {
        // The stop is in the snapshot (no node routes to a stopped deployment): the grace lets every node apply it
        // before the runtimes go, so a request the stop cuts is answered deployment_stopped, not a retryable 502.
        await sleep(drainGraceMs, abort.signal);
        for (const r of halting) await retire(provisioner, r);
      }
      return;
    }

    const floor = Math.max(0, ...[...(floors.get(id) ?? [])].map((f) => f.n));
    const want = Math.max(targetReplicas(d), Math.min(floor, d.provisioner === 'external' ? 1 : d.maxReplicas));
    // Too many: cancel starts first (newest first), then drain the newest ready replicas.
    while (ready.length + starting.length > want && starting.length > 0) {
      const r = starting.pop();
      if (r) await retire(provisioner, r);
    }
    while (ready.length > want) {
      const r = ready.pop();
      if (r) await drain(provisioner, r);
    }

    const failed = failures.get(id) ?? 0;
    const missing = Math.max(0, want - ready.length - starting.length - settling);
    const backingOff = (backoffs.get(id)?.until ?? 0) > Date.now();
    if (missing > 0 && failed < maxStartAttempts && !backingOff && !abort.signal.aborted) {
      const info = await findRuntimeInfo(db, d.entryId);
      const base: Omit<ReplicaSpec, 'replicaId'> = {
        deploymentId: d.id,
        tenantId: d.tenantId,
        entryName: d.entryName,
        servedModel: info?.servedModel ?? d.entryName,
        coldStartSeconds: info?.coldStartSeconds ?? null,
        contextLength: info?.contextLength ?? null,
        externalUrl: d.externalUrl,
      };
      for (let i = 0; i < missing; i++) {
        const row = await insertStartingReplica(db, { deploymentId: d.id, kind: 'sim', servedModel: base.servedModel, attempt: failed + 1 });
        if (!row) return; // deleted meanwhile
        if (provisioner.billsGpuTime) {
          await openReplicaInterval(db, { replicaId: row.id, deploymentId: d.id, tenantId: d.tenantId, entryId: d.entryId, gpuCount: d.gpuCount ?? 1 });
        }
        launch(d, provisioner, base, row);
        starting.push(row);
      }
    }

    // The state says how far the replicas are from the decision.
    if (settling > 0) return; // the pass its launch scheduled decides
    if (want === 0 && ready.length === 0 && starting.length === 0) {
      await transitionDeployment(db, { deploymentId: id, from: ['provisioning', 'running', 'scaling'], to: 'scaled_to_zero' });
    } else if (ready.length >= want && starting.length === 0) {
      await transitionDeployment(db, { deploymentId: id, from: ['provisioning', 'scaling', 'scaled_to_zero'], to: 'running' });
    } else if (ready.length === 0 && starting.length === 0 && failed >= maxStartAttempts) {
      const row = await findDeploymentById(db, id);
      await transitionDeployment(db, { deploymentId: id, from: [...SERVING_STATES], to: 'failed', lastError: row?.lastError ?? 'no replica could be started' });
      log.warn({ deploymentId: id, lastError: row?.lastError }, 'deployment failed');
    } else {
      await transitionDeployment(db, { deploymentId: id, from: ['running', 'scaled_to_zero'], to: 'scaling' });
    }
  }

  function schedule(id: string): Promise<void> {
    if (abort.signal.aborted || closed || !isLeader()) return Promise.resolve();
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

  for (const p of Object.values(provisioners))
    p?.onExit?.((deploymentId) => {
      log.warn({ deploymentId }, 'a replica exited; replacing it');
      void schedule(deploymentId);
    });

  async function settled(id?: string): Promise<void> {
    for (;;) {
      const pending = [
        ...(id === undefined ? [...tails.values()] : [tails.get(id)].filter((p) => p !== undefined)),
        ...[...starts.values()].filter((t) => id === undefined || t.deploymentId === id).map((t) => t.done),
        ...[...drains.values()].filter((t) => id === undefined || t.deploymentId === id).map((t) => t.done),
      ];
      if (pending.length === 0) return;
      await Promise.allSettled(pending);
    }
  }

  /**
   * Tells the provisioners whose replicas outlive this process whether it has stopped acting for them (before starts
   * and drains are cancelled: a cancelled start must not resize what the next leader takes over).
   */
  function handOver(handedOver: boolean): void {
    for (const p of Object.values(provisioners)) p?.handOver?.(handedOver);
  }

  /**
   * Replicas that outlive this process are handed over as they are (row, runtime and open ledger interval, which ends
   * at its last heartbeat: the next leader adopts them); the rest are stopped. `forget`: the rows of stopped ones go too
   * (leadership lost: the new leader replaces them at once instead of routing to them).
   */
  async function stopEverything(forget = false): Promise<void> {
    abort.abort();
    await settled();
    for (const o of [...owned.values()]) {
      if (o.provisioner.outlivesControlPlane === true) {
        owned.delete(o.id);
        continue;
      }
      await stopOwned(o.id);
      await closeReplicaInterval(db, o.id).catch(() => undefined);
      if (forget) await removeReplica(db, o.id).catch(() => undefined);
    }
  }

  return Object.freeze<Reconciler>({
    schedule,
    exclusive: chain,
    settled,
    retireDeleted(deploymentId: string, provisioner: Provisioner | undefined, replicas: readonly Replica[]) {
      for (const r of replicas) retiring.add(r.id);
      return chain(deploymentId, async () => {
        try {
          if (replicas.length === 0) return;
          await sleep(drainGraceMs, abort.signal);
          for (const r of replicas) await retire(provisioner, r);
        } finally {
          for (const r of replicas) retiring.delete(r.id);
        }
      });
    },
    async reconcileAll(): Promise<void> {
      if (!isLeader() || closed) return;
      handOver(false); // leading (again): this process acts for its replicas
      const ids = await listActiveDeploymentIds(db);
      // Replicas whose deployment left the serving states (or the database) are reconciled too.
      const extra = new Set([...owned.values()].map((o) => o.deploymentId).filter((x) => !ids.includes(x)));
      const rows =
        owned.size === 0
          ? []
          : await db
              .selectFrom('deploymentReplicas')
              .select('id')
              .where('id', 'in', [...owned.keys()])
              .execute();
      const present = new Set(rows.map((r) => r.id));
      for (const o of [...owned.values()])
        if (!present.has(o.id) && !drains.has(o.id) && !retiring.has(o.id)) {
          await stopOwned(o.id);
          await closeReplicaInterval(db, o.id).catch(() => undefined);
        }
      await Promise.all([...ids, ...extra].map(schedule));
      for (const p of Object.values(provisioners)) await p?.sweep?.(ids).catch((err: unknown) => log.warn({ err }, 'provisioner sweep failed'));
    },
    resetFailures(deploymentId: string): void {
      failures.delete(deploymentId);
      clearBackoff(deploymentId);
    },
    holdAtLeast(deploymentId: string, n: number): () => void {
      const hold = { n };
      const set = floors.get(deploymentId) ?? new Set();
      set.add(hold);
      floors.set(deploymentId, set);
      return () => {
        set.delete(hold);
        if (set.size === 0 && floors.get(deploymentId) === set) floors.delete(deploymentId);
      };
    },
    ownedReplicas: () => owned,
    runtimeLoad,
    liveReplicaIds: () => [...owned.keys(), ...starts.keys()],
    async pause(): Promise<void> {
      handOver(true);
      abort.abort();
      await settled();
      if (!closed) abort = new AbortController();
    },
    async relinquish(): Promise<void> {
      handOver(true);
      await stopEverything(true);
      failures.clear();
      for (const id of [...backoffs.keys()]) clearBackoff(id);
      if (!closed) abort = new AbortController();
    },
    async close(): Promise<void> {
      if (closed) return; // idempotent: provisioners close once
      closed = true;
      for (const id of [...backoffs.keys()]) clearBackoff(id);
      handOver(true);
      await stopEverything();
      await Promise.all(Object.values(provisioners).map((p) => p?.close?.()));
    },
  });
}
