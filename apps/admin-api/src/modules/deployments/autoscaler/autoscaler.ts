// The autoscaler loop (leader only): every tick it reads the nodes' load reports (and the runtimes'
// vLLM gauges), decides each serving deployment's desired replica count (decide.ts), records changes
// (published to the data plane) and lets the reconciler converge; it also keeps the GPU-time ledger's
// phases and heartbeats. See docs/autoscaling.md.
import { sql } from 'kysely';
import type { ReplicaPhase } from '@infer/db';
import { listServingDeployments, recordScaleDecision, type Deployment } from '../deployment-store.ts';
import type { DeploymentsContext } from '../deployments-context.ts';
import { closeStaleReplicaIntervals, heartbeatReplicaIntervals, reopenReplicaIntervals, switchReplicaPhase } from '../gpu-ledger.ts';
import { pruneLoadReports, readAggregateLoad, type AggregateLoad } from '../node-load.ts';
import type { RuntimeLoad } from '../runtime-metrics.ts';
import { resolveTargetConcurrency } from '../target-concurrency.ts';
import { decide, DEFAULT_WINDOWS, newMemory, type ScalerMemory, type ScalingWindows } from './decide.ts';
import type { LeaderElection } from './leader-election.ts';

export interface AutoscalerOptions {
  /** Decision interval (default 1 s). */
  readonly tickMs?: number;
  readonly windows?: Partial<ScalingWindows>;
  /** A node's load report counts this long (default 3 s). */
  readonly reportTtlMs?: number;
  /** GPU-time ledger heartbeat interval (default 2 s): at most this much is lost when the leader dies. */
  readonly heartbeatMs?: number;
  /** Full reconcile (health checks, rows deleted elsewhere) interval (default 10 s). */
  readonly sweepMs?: number;
  /** Scrape each ready replica's /metrics (vLLM gauges) every tick (default true). */
  readonly scrapeRuntimeMetrics?: boolean;
  /**
   * Leadership lost (the database gone for a moment, or restarted): the replicas this process runs keep serving this
   * long (default 30 s), for the lock regained meanwhile; then they are stopped.
   */
  readonly relinquishGraceMs?: number;
}

export interface Autoscaler {
  /** Runs one tick now (tests; wake requests). */
  tick(): Promise<void>;
  isLeader(): boolean;
  close(): Promise<void>;
}

interface Tracked {
  memory: ScalerMemory;
  /** The desired count this leader last decided or saw. */
  seenDesired: number;
  /** state|min|max|updatedAt: a change made elsewhere (another replica's API call) triggers a reconcile. */
  signature: string;
}

export function startAutoscaler(ctx: DeploymentsContext, election: LeaderElection, opts: AutoscalerOptions = {}): Autoscaler {
  const tickMs = opts.tickMs ?? 1_000;
  const windows: ScalingWindows = { ...DEFAULT_WINDOWS, ...opts.windows };
  const reportTtlMs = opts.reportTtlMs ?? 3_000;
  const heartbeatMs = opts.heartbeatMs ?? 2_000;
  const sweepMs = opts.sweepMs ?? 10_000;
  const scrape = opts.scrapeRuntimeMetrics ?? true;
  const relinquishGraceMs = opts.relinquishGraceMs ?? 30_000;
  /** The grace after a loss: its timer, and the stop it started once it ran out. */
  let relinquishing: NodeJS.Timeout | undefined;
  let relinquished: Promise<void> = Promise.resolve();
  const { db, reconciler, log } = ctx;
  const tracked = new Map<string, Tracked>();
  const phases = new Map<string, ReplicaPhase>();
  let lastHeartbeat = 0;
  let lastSweep = 0;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | null = null;
  let again = false;
  let closed = false;

  async function runtimeLoads(): Promise<Map<string, RuntimeLoad>> {
    const out = new Map<string, RuntimeLoad>();
    if (!scrape) return out;
    const replicas = [...reconciler.ownedReplicas().values()];
    const results = await Promise.all(replicas.map(async (r) => [r.id, await reconciler.runtimeLoad(r.id, Math.max(200, tickMs))] as const));
    for (const [id, load] of results) if (load) out.set(id, load);
    return out;
  }

  async function decideOne(d: Deployment, load: AggregateLoad | undefined, runtime: number, ready: number, now: number): Promise<void> {
    const signature = `${d.state}|${d.minReplicas}|${d.maxReplicas}|${d.updatedAt.getTime()}`;
    let t = tracked.get(d.id);
    if (!t) {
      t = { memory: newMemory(now), seenDesired: d.desiredReplicas, signature };
      tracked.set(d.id, t);
      void reconciler.schedule(d.id);
    } else if (t.signature !== signature) {
      t.signature = signature;
      void reconciler.schedule(d.id);
    }
    // Someone raised the count (a wake, a new minimum): that is activity, so no early scale to zero.
    if (d.desiredReplicas > t.seenDesired) t.memory = { ...t.memory, lastActiveAt: now };
    t.seenDesired = d.desiredReplicas;

    const reported = (load?.inFlight ?? 0) + (load?.held ?? 0);
    const decision = decide({
      now,
      load: Math.max(reported, runtime),
      held: load?.held ?? 0,
      current: d.desiredReplicas,
      readyReplicas: ready,
      settings: {
        minReplicas: d.minReplicas,
        maxReplicas: d.provisioner === 'external' ? Math.min(d.maxReplicas, 1) : d.maxReplicas,
        targetConcurrency: resolveTargetConcurrency(d, ctx.replicaBaseConcurrency),
        scaleToZeroAfterMs: d.scaleToZeroAfterSeconds * 1000,
        scaleDownDelayMs: d.scaleDownDelaySeconds * 1000,
      },
      windows,
      memory: t.memory,
    });
    t.memory = decision.memory;
    if (decision.reason === null) return;
    const moved = await recordScaleDecision(db, { deploymentId: d.id, desiredReplicas: decision.desired, reason: decision.reason });
    if (!moved) return;
    t.seenDesired = decision.desired;
    t.signature = `${moved.state}|${moved.minReplicas}|${moved.maxReplicas}|${moved.updatedAt.getTime()}`;
    log.info({ deploymentId: d.id, desired: decision.desired, reason: decision.reason }, 'autoscaler decision');
    void reconciler.schedule(d.id);
  }

  async function tickOnce(): Promise<void> {
    if (!election.isLeader() || closed) return;
    const now = Date.now();
    const [deployments, loads, runtime] = await Promise.all([listServingDeployments(db), readAggregateLoad(db, reportTtlMs), runtimeLoads()]);
    const owned = [...reconciler.ownedReplicas().values()];
    const serving = new Set(deployments.map((d) => d.id));

    for (const d of deployments) {
      const mine = owned.filter((r) => r.deploymentId === d.id);
      const ready = mine.filter((r) => !r.draining).length;
      const runtimeLoad = mine.reduce((acc, r) => {
        const own = runtime.get(r.id);
        return acc + (own ? own.running + own.waiting : 0);
      }, 0);
      await decideOne(d, loads.get(d.id), runtimeLoad, ready, now).catch((err: unknown) =>
        log.error({ err, deploymentId: d.id }, 'autoscaler decision failed'),
      );
    }
    for (const id of tracked.keys()) if (!serving.has(id)) tracked.delete(id);
    // Replicas of deployments that left the serving states (stopped, deleted elsewhere) go now.
    for (const id of new Set(owned.map((r) => r.deploymentId))) if (!serving.has(id)) void reconciler.schedule(id);

    // GPU-time ledger: serving while a request is in flight on the replica (its own gauge when it has one,
    // else the nodes' reports for its deployment), idle otherwise.
    for (const r of owned) {
      if (!r.metered) continue;
      const own = runtime.get(r.id);
      const busy = own ? own.running + own.waiting > 0 : (loads.get(r.deploymentId)?.inFlight ?? 0) > 0;
      const phase: ReplicaPhase = busy ? 'serving' : 'idle';
      if (phases.get(r.id) === phase) continue;
      await switchReplicaPhase(db, r.id, phase);
      phases.set(r.id, phase);
    }
    const ids = reconciler.liveReplicaIds();
    for (const id of phases.keys()) if (!ids.includes(id)) phases.delete(id);
    if (now - lastHeartbeat >= heartbeatMs) {
      lastHeartbeat = now;
      await heartbeatReplicaIntervals(db, ids);
    }
    if (now - lastSweep >= sweepMs) {
      lastSweep = now;
      await pruneLoadReports(db, Math.max(60_000, reportTtlMs * 10));
      void reconciler.reconcileAll().catch((err: unknown) => log.error({ err }, 'deployment sweep failed'));
    }
  }

  function tick(): Promise<void> {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await tickOnce();
        } catch (err) {
          log.error({ err }, 'autoscaler tick failed');
        }
      } while (again && !closed);
    })().finally(() => {
      running = null;
    });
    return running;
  }

  function loop(): void {
    if (closed) return;
    timer = setTimeout(() => void tick().finally(loop), tickMs);
    timer.unref();
  }

  const unsubscribe = ctx.wakes.subscribe(() => void tick());

  election.start({
    async onAcquire() {
      // Regained within the grace: the replicas this process still runs are its own again. A stop the grace already
      // began ends first.
      clearTimeout(relinquishing);
      relinquishing = undefined;
      // Intervals opened from now on are this leader's own (a wake may start or adopt a replica while this recovers).
      const tookOver = (await sql<{ now: Date }>`select now() as now`.execute(db)).rows[0]!.now;
      await relinquished;
      // The previous leader's open intervals end at their last heartbeat (its replicas died with it, or are adopted
      // with an interval of this leader's).
      const live = reconciler.liveReplicaIds();
      const closedCount = await closeStaleReplicaIntervals(db, live, tookOver);
      if (closedCount > 0) log.info({ intervals: closedCount }, 'closed GPU-time intervals of an earlier leader at their last heartbeat');
      // Ours that another leader closed meanwhile are billed again from now.
      const reopened = await reopenReplicaIntervals(db, live);
      if (reopened > 0) log.info({ intervals: reopened }, 'reopened GPU-time intervals of replicas this leader still runs');
      tracked.clear();
      phases.clear();
      lastSweep = Date.now();
      await reconciler.reconcileAll();
      void tick();
    },
    async onLose() {
      tracked.clear();
      if (closed) {
        await reconciler.relinquish();
        return;
      }
      // Stop acting now; stop the replicas only if the lock is not back within the grace (a database restart or a
      // blip would otherwise cold-start every dedicated replica).
      await reconciler.pause();
      clearTimeout(relinquishing);
      relinquishing = setTimeout(() => {
        relinquishing = undefined;
        if (election.isLeader()) return;
        relinquished = reconciler.relinquish().catch((err: unknown) => log.warn({ err }, 'stopping the replicas of a lost leadership failed'));
      }, relinquishGraceMs);
      relinquishing.unref();
    },
  });
  loop();

  return Object.freeze({
    tick,
    isLeader: () => election.isLeader(),
    async close(): Promise<void> {
      closed = true;
      clearTimeout(timer);
      clearTimeout(relinquishing);
      unsubscribe();
      await running;
      await election.close();
    },
  });
}
