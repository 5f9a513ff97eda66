import type { ClientResponse } from '../front/client-response.ts';
import { performance } from 'node:perf_hooks';
import { ApiError } from '@infer/shared';
import type { ColdStartSample, DeploymentLoad, SnapshotDeployment } from '@infer/shared';
import type { ConfigStore } from '../config/config-store.ts';
import { deploymentKey } from '../config/config-view.ts';
import type { RouteTarget } from '../config/config-view.ts';
import { checkContextLength, estimatePromptTokens, requestedCompletion } from '../limits/token-budget.ts';
import { streamErrorEvent } from '../proxy/upstream-errors.ts';
import { afterDurable, type UsageSink } from '../usage/usage-reporter.ts';
import { ClientGoneError } from '../client-gone.ts';
import { escapeLabel } from '../metrics.ts';
import { coldStartComment, type ColdStartPhase } from './cold-start-progress.ts';
import { SCALE_UP_TIMEOUT_HEADER, holdMs } from './hold-deadline.ts';
import type { HoldBounds } from './hold-deadline.ts';
import type { NodeChannel } from './node-channel.ts';

export interface ScaleOptions {
  /** Where wakes and load reports go; null (standalone node): nothing is held, as before. */
  readonly channel: NodeChannel | null;
  /** Requests held per deployment on this node (default 1000); beyond it: 429. */
  readonly queueMax?: number;
  /** Bounds of the hold deadline, ms (default 30 s and 600 s). */
  readonly holdMinMs?: number;
  readonly holdMaxMs?: number;
  /** Period of load reports, progress comments and wake re-sends, ms (default 1000). */
  readonly tickMs?: number;
  /** Least time between two wakes of one deployment, ms (default 3000). */
  readonly wakeResendMs?: number;
  readonly onError?: (message: string, err: unknown) => void;
}

/** A request the node holds for a cold start. */
export interface HeldTicket {
  /** Resolves with the deployment's ready target when it is this request's turn; rejects with the answer to send. */
  readonly target: Promise<RouteTarget>;
  /**
   * The request passed (or failed) admission: the next held request may go. Idempotent. Returns the
   * deployment's target as it is now (null when it has no ready replica): a request that waited at the
   * concurrency gate got a slot another replica may have freed, so it must be routed among today's replicas,
   * not those of the moment it was released.
   */
  admitted(): RouteTarget | null;
  /** What is left of the hold deadline, ms: a released request may wait that long for a replica slot. */
  remainingMs(): number;
}

type HoldOutcome = 'released' | 'expired' | 'refused' | 'full' | 'client_gone' | 'halted';

export interface ScaleHolds {
  /**
   * Holds a dedicated request when its deployment has no ready replica, when earlier requests are still held
   * (arrival order), or when every replica slot is taken while more replicas start; wakes a deployment at
   * zero. Null when the request may go on at once. Throws the
   * answer to send now: 400 bad `x-scale-up-timeout` or a prompt over the context length (no point waiting), 503 `deployment_scaling_up` when the cold start still
   * expected outlasts the deadline, 429 when this deployment's hold queue is full.
   */
  hold(res: ClientResponse, target: RouteTarget, usageId: string, body: Record<string, unknown>): HeldTicket | null;
  /** Turns usage records of requests that waited into cold-start samples, then passes them on. */
  wrapUsage(sink: UsageSink): UsageSink;
  /**
   * A deployment's target as the node routes it now (null: not a deployment, or no ready replica). The
   * concurrency gate hands a waiting request a slot that any replica may have freed, so it must be routed
   * among the current replicas, not those of the moment it arrived.
   */
  current(target: RouteTarget): RouteTarget | null;
  /** Requests held now on a deployment (tests, metrics). */
  held(deploymentId: string): number;
  /** Builds the current load report's deployments (what the next report will send). */
  load(): DeploymentLoad[];
  /** Sends one load report now (tests; the timer sends them every tick). */
  report(): Promise<boolean>;
  close(): void;
  /**
   * The deployment of a target was stopped, failed or deleted by now, per the latest snapshot: the error an answer
   * its runtime cut meanwhile ends with (null: it was not, or the target is shared).
   */
  halted(target: RouteTarget): ApiError | null;
  /** Held requests now and how holds ended, as Prometheus lines (the node's /metrics). */
  renderMetrics(lines: string[]): void;
}

interface Held {
  readonly res: ClientResponse;
  readonly usageId: string;
  readonly stream: boolean;
  readonly since: number;
  /** performance.now() at the hold deadline. */
  readonly until: number;
  readonly resolve: (t: RouteTarget) => void;
  readonly reject: (e: unknown) => void;
  readonly onClose: () => void;
  deadline: NodeJS.Timeout | null;
  done: boolean;
}

interface Waking {
  readonly id: string;
  readonly queue: Held[];
  /** The released request now going through admission (the concurrency gate keeps the order from there). */
  admitting: Held | null;
  /** Epoch ms when this node first saw the deployment start booting (wake sent or state), null when ready. */
  bootSince: number | null;
  wakeInFlight: boolean;
  lastWakeAt: number;
  /** The control plane accepted a wake for the current boot. */
  acknowledged: boolean;
}

interface DeploymentInfo {
  readonly d: SnapshotDeployment;
  readonly routeKey: string;
}

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
  'x-cold-start': 'true',
} as const;
const SAMPLES_MAX = 1000;
const WAITED_MAX = 10_000;
const BOOTING: ReadonlySet<string> = new Set(['pending', 'provisioning', 'scaling']);

/** The per-node serverless request path: hold through cold starts, wake, drain in order, report load. */
export function createScaleHolds(
  opts: ScaleOptions,
  store: ConfigStore,
  concurrency: (target: RouteTarget) => { readonly active: number; readonly queued: number },
): ScaleHolds {
  const { channel } = opts;
  const bounds: HoldBounds = { minMs: opts.holdMinMs ?? 30_000, maxMs: opts.holdMaxMs ?? 600_000 };
  const queueMax = opts.queueMax ?? 1000;
  const wakeResendMs = opts.wakeResendMs ?? 3000;
  const waking = new Map<string, Waking>();
  let infos = new Map<string, DeploymentInfo>();
  /** Requests that waited, by usage id, until their usage record gives the time to first token. */
  const waited = new Map<string, { deploymentId: string; endpointId: string; waitMs: number; stream: boolean }>();
  let samples: ColdStartSample[] = [];
  /** How holds ended (metrics). */
  const outcomes: Record<HoldOutcome, number> = { released: 0, expired: 0, refused: 0, full: 0, client_gone: 0, halted: 0 };
  let reporting = false;

  const index = (): void => {
    const snap = store.snapshot();
    const next = new Map<string, DeploymentInfo>();
    for (const d of snap?.deployments ?? []) next.set(d.id, { d, routeKey: deploymentKey(d.tenantSlug, d.endpointName) });
    infos = next;
  };
  const currentTarget = (id: string): RouteTarget | null => {
    const info = infos.get(id);
    const t = info === undefined ? undefined : store.view?.deploymentByTenantAndName.get(info.routeKey);
    return t !== undefined && t.deploymentId === id ? t : null;
  };

  /**
   * Cold start still expected, ms: the entry's measured cold start (or, before there is one, its stated Cold Start
   * TTFT) less what has passed since the boot began.
   */
  const etaMs = (w: Waking, ready: boolean): number => {
    if (ready) return 0;
    const d = infos.get(w.id)?.d;
    const expected = (d?.measuredColdStartSeconds ?? d?.coldStartSeconds ?? 0) * 1000;
    return Math.max(0, Math.round(expected - (Date.now() - (w.bootSince ?? Date.now()))));
  };
  const phaseOf = (w: Waking, ready: boolean): ColdStartPhase => {
    if (ready) return 'loading';
    const d = infos.get(w.id)?.d;
    return w.acknowledged || (d !== undefined && BOOTING.has(d.state) && d.desiredReplicas > 0) ? 'starting' : 'queued';
  };
  /**
   * Every replica slot is taken (requests already wait at the concurrency gate) while more replicas are on
   * their way: the request is held with its hold deadline rather than refused by the gate's short queue.
   */
  const backedUpWhileScaling = (id: string, target: RouteTarget): boolean => {
    const d = infos.get(id)?.d;
    return d !== undefined && d.desiredReplicas > target.upstreams.length && concurrency(target).queued > 0;
  };
  const retryAfter = (w: Waking): string => String(Math.max(2, Math.ceil(etaMs(w, false) / 1000)));
  const scalingUp = (w: Waking, message: string): ApiError => new ApiError('deployment_scaling_up', message, null, { 'retry-after': retryAfter(w) });

  const wake = (w: Waking): void => {
    if (channel === null || w.wakeInFlight || Date.now() - w.lastWakeAt < wakeResendMs) return;
    w.wakeInFlight = true;
    w.lastWakeAt = Date.now();
    w.bootSince ??= w.lastWakeAt;
    void channel.wake(w.id).then((ok) => {
      w.wakeInFlight = false;
      if (ok) w.acknowledged = true;
    });
  };

  const settle = (w: Waking, h: Held): void => {
    h.done = true;
    if (h.deadline !== null) clearTimeout(h.deadline);
    h.res.off('close', h.onClose);
    const i = w.queue.indexOf(h);
    if (i >= 0) w.queue.splice(i, 1);
  };

  const release = (w: Waking, h: Held, target: RouteTarget): void => {
    settle(w, h);
    outcomes.released++;
    const waitMs = Math.round(performance.now() - h.since);
    if (h.stream) {
      if (!h.res.writableEnded) h.res.write(`: cold-start phase=ready wait_ms=${waitMs}\n\n`);
    } else {
      h.res.setHeader('x-cold-start', 'true');
      h.res.setHeader('x-cold-start-wait-ms', String(waitMs));
    }
    if (target.deploymentId !== null) {
      waited.set(h.usageId, { deploymentId: target.deploymentId, endpointId: target.endpointId, waitMs, stream: h.stream });
      if (waited.size > WAITED_MAX) waited.delete(waited.keys().next().value!);
    }
    w.admitting = h;
    // A client that leaves between release and admission must not stall the queue.
    h.res.once('close', () => admitted(w, h));
    h.resolve(target);
  };

  const admitted = (w: Waking, h: Held): void => {
    if (w.admitting !== h) return;
    w.admitting = null;
    drain(w);
  };

  /** Releases held requests one at a time, in arrival order, each once the one before passed admission. */
  const drain = (w: Waking): void => {
    const target = currentTarget(w.id);
    if (target === null || !target.ready) return;
    w.bootSince = null;
    w.acknowledged = false;
    if (w.admitting === null && w.queue.length > 0) release(w, w.queue[0]!, target);
    if (w.queue.length === 0 && w.admitting === null) waking.delete(w.id);
  };

  const fail = (w: Waking, h: Held, err: ApiError): void => {
    settle(w, h);
    if (h.stream && !h.res.writableEnded) h.res.end(streamErrorEvent(err));
    h.reject(err);
  };

  const newWaking = (id: string): Waking => {
    const w: Waking = { id, queue: [], admitting: null, bootSince: null, wakeInFlight: false, lastWakeAt: 0, acknowledged: false };
    waking.set(id, w);
    return w;
  };

  const onSnapshot = (): void => {
    index();
    // A boot this node did not ask for (another node's wake, the autoscaler): its start dates the ETA.
    for (const [id, { d }] of infos) {
      if (!waking.has(id) && BOOTING.has(d.state) && d.desiredReplicas > 0 && currentTarget(id)?.ready !== true) newWaking(id).bootSince = Date.now();
    }
    for (const w of [...waking.values()]) {
      const target = currentTarget(w.id);
      const d = infos.get(w.id)?.d;
      if (target?.ready === true) {
        drain(w);
        continue;
      }
      if (d === undefined || d.state === 'stopped' || d.state === 'failed') {
        const why = d === undefined ? 'was deleted' : d.state === 'failed' ? 'failed to start' : 'was stopped';
        // Deleted is final, as stopped is (deployment_stopped: x-should-retry false); a retry would only meet a 404.
        const code = d?.state === 'failed' ? 'deployment_failed' : 'deployment_stopped';
        for (const h of [...w.queue]) {
          outcomes.halted++;
          fail(w, h, new ApiError(code, `The deployment ${why} while this request waited for it.`));
        }
        waking.delete(w.id);
        continue;
      }
      if (BOOTING.has(d.state) && d.desiredReplicas > 0) w.bootSince ??= Date.now();
    }
  };
  onSnapshot();
  const unsubscribe = store.onVersion(onSnapshot);

  const load = (): DeploymentLoad[] => {
    const out: DeploymentLoad[] = [];
    for (const [id, { d }] of infos) {
      if (d.state === 'stopped') continue;
      const target = currentTarget(id);
      const w = waking.get(id);
      const c = target === null ? null : concurrency(target);
      out.push({ deploymentId: id, inFlight: c === null ? 0 : c.active + c.queued, held: w === undefined ? 0 : w.queue.length });
    }
    return out;
  };

  const report = async (): Promise<boolean> => {
    if (channel === null || reporting) return false; // a slow control plane: this tick's report is dropped
    reporting = true;
    const sent = samples;
    samples = [];
    try {
      const ok = await channel.report({ nodeId: channel.nodeId, sentAt: new Date().toISOString(), deployments: load(), coldStarts: sent });
      // Samples wait for the next report (bounded, newest kept); load figures are only worth sending fresh.
      if (!ok) samples = [...sent, ...samples].slice(-SAMPLES_MAX);
      return ok;
    } finally {
      reporting = false;
    }
  };

  const tick = (): void => {
    for (const w of [...waking.values()]) {
      const target = currentTarget(w.id);
      const ready = target?.ready === true;
      // Kept while a boot is under way, for the ETA of the next request.
      if (w.queue.length === 0 && w.admitting === null && (ready || w.bootSince === null)) {
        waking.delete(w.id);
        continue;
      }
      if (!ready && w.queue.length > 0) wake(w);
      const now = performance.now();
      const eta = etaMs(w, ready);
      const phase = phaseOf(w, ready);
      for (const h of w.queue) {
        if (h.stream && !h.res.writableEnded) h.res.write(coldStartComment(phase, now - h.since, eta));
      }
    }
    void report();
  };
  const timer = channel === null ? null : setInterval(tick, opts.tickMs ?? 1000);
  timer?.unref();

  return {
    hold(res, target, usageId, body) {
      const id = target.deploymentId;
      if (id === null) return null;
      const header = res.req?.headers[SCALE_UP_TIMEOUT_HEADER];
      // Checked on every dedicated request (warm, stopped, failed, or a node without holds): a malformed value is a
      // client's bug that must not wait for a cold start to show.
      if (header !== undefined) holdMs(header, null, bounds);
      if (channel === null) return null;
      const w = waking.get(id);
      if (target.ready && (w === undefined || (w.queue.length === 0 && w.admitting === null)) && !backedUpWhileScaling(id, target)) return null;
      const info = infos.get(id);
      if (!target.ready && (info === undefined || info.d.state === 'stopped' || info.d.state === 'failed')) return null;
      checkContextLength(target.limits.contextLength, estimatePromptTokens(body), requestedCompletion(body));
      const stream = body['stream'] === true;
      // The default deadline follows the longer of the stated and the measured cold start, so a runtime slower than
      // its stated figure does not refuse every request that did not set its own deadline.
      const expectedColdSeconds = Math.max(info?.d.coldStartSeconds ?? 0, info?.d.measuredColdStartSeconds ?? 0);
      const deadlineMs = holdMs(header, expectedColdSeconds > 0 ? expectedColdSeconds : null, bounds);
      if (target.ready && deadlineMs === 0) return null; // no cold start to wait for; the gate's own queue applies
      const ww = w ?? newWaking(id);
      if (!target.ready) wake(ww);
      const eta = etaMs(ww, target.ready);
      if (deadlineMs === 0 || deadlineMs < eta) {
        if (ww.queue.length === 0 && ww.admitting === null && target.ready) waking.delete(id);
        outcomes.refused++;
        throw scalingUp(
          ww,
          deadlineMs === 0
            ? 'The deployment is scaling up from zero and the request asked not to wait (x-scale-up-timeout: 0). It has been woken; retry shortly.'
            : `The deployment is scaling up; its cold start is expected to take about ${Math.ceil(eta / 1000)} s more, longer than this request's hold deadline of ${deadlineMs / 1000} s. It has been woken; retry shortly.`,
        );
      }
      if (ww.queue.length >= queueMax) {
        outcomes.full++;
        throw new ApiError(
          'concurrency_limit_exceeded',
          `Too many requests are waiting for this deployment to scale up: ${queueMax} are already held on this node. Retry in a few seconds.`,
          null,
          { 'retry-after': retryAfter(ww) },
        );
      }
      let resolve!: (t: RouteTarget) => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<RouteTarget>((ok, no) => {
        resolve = ok;
        reject = no;
      });
      const h: Held = {
        res,
        usageId,
        stream,
        since: performance.now(),
        until: performance.now() + deadlineMs,
        resolve,
        reject,
        deadline: null,
        done: false,
        onClose: () => {
          if (h.done) return;
          settle(ww, h);
          outcomes.client_gone++;
          reject(new ClientGoneError('was held for a cold start'));
          if (ww.queue.length === 0 && ww.admitting === null && currentTarget(id)?.ready === true) waking.delete(id);
        },
      };
      h.deadline = setTimeout(() => {
        if (h.done) return;
        outcomes.expired++;
        fail(
          ww,
          h,
          scalingUp(
            ww,
            `The deployment did not finish scaling up within this request's hold deadline of ${Math.round(deadlineMs / 100) / 10} s. Retry shortly.`,
          ),
        );
      }, deadlineMs);
      res.once('close', h.onClose);
      ww.queue.push(h);
      if (stream) {
        res.writeHead(200, SSE_HEADERS);
        res.write(coldStartComment(phaseOf(ww, target.ready), 0, eta));
      }
      if (target.ready) drain(ww);
      let passed = false;
      return {
        target: promise,
        admitted() {
          if (!passed) {
            passed = true;
            admitted(ww, h);
          }
          const now = currentTarget(id);
          return now?.ready === true ? now : null;
        },
        remainingMs: () => Math.max(0, Math.round(h.until - performance.now())),
      };
    },
    wrapUsage(sink) {
      return {
        record(r) {
          const w = waited.get(r.requestId);
          if (w !== undefined) {
            waited.delete(r.requestId);
            if (r.status < 400 && r.ttftMs !== null) {
              // A JSON answer's first byte comes once it is generated in full, so its "time to first token" would count
              // the generation too (a long answer once made every later hold plan for 19 s instead of 3.4): its
              // sample is the wait for a replica, the cold start part of its time.
              const ttftMs = w.stream ? r.ttftMs : w.waitMs;
              samples.push({ deploymentId: w.deploymentId, endpointId: w.endpointId, waitMs: w.waitMs, ttftMs: Math.round(ttftMs) });
              if (samples.length > SAMPLES_MAX) samples.shift();
            }
          }
          sink.record(r);
        },
        whenDurable: (fn) => afterDurable(sink, fn),
      };
    },
    current(target) {
      if (target.deploymentId === null) return null;
      const now = currentTarget(target.deploymentId);
      return now?.ready === true ? now : null;
    },
    halted(target) {
      if (target.deploymentId === null) return null;
      const info = infos.get(target.deploymentId);
      // Gone from a config the node holds: deleted (the answer's record is still billed to its tenant).
      if (info === undefined) {
        return store.snapshot() === null
          ? null
          : new ApiError('deployment_stopped', `The deployment of ${target.name} was deleted while this request was being answered.`);
      }
      if (info.d.state === 'stopped') {
        return new ApiError(
          'deployment_stopped',
          `The deployment of ${target.name} was stopped while this request was being answered: start it again to serve requests.`,
        );
      }
      if (info.d.state === 'failed') return new ApiError('deployment_failed', `The deployment of ${target.name} failed while this request was being answered.`);
      return null;
    },
    held: (id) => waking.get(id)?.queue.length ?? 0,
    renderMetrics(lines) {
      lines.push('# HELP dataplane_held_requests Requests held now for a cold start or a scale-up, by deployment.', '# TYPE dataplane_held_requests gauge');
      for (const w of waking.values()) {
        const d = infos.get(w.id)?.d;
        if (d !== undefined && w.queue.length > 0)
          lines.push(`dataplane_held_requests{deployment="${escapeLabel(d.id)}",endpoint="${escapeLabel(d.endpointName)}"} ${w.queue.length}`);
      }
      lines.push(
        '# HELP dataplane_holds_total Held requests by how their hold ended: released (to a replica), expired (hold deadline), refused (at once: the deadline was shorter than the cold start expected), full (hold queue), client_gone, halted (deployment stopped, failed or deleted; node shutting down).',
        '# TYPE dataplane_holds_total counter',
      );
      for (const k in outcomes) lines.push(`dataplane_holds_total{outcome="${k}"} ${outcomes[k as HoldOutcome]}`);
    },
    load,
    report,
    close() {
      if (timer !== null) clearInterval(timer);
      unsubscribe();
      for (const w of waking.values()) {
        for (const h of [...w.queue]) {
          outcomes.halted++;
          fail(w, h, new ApiError('service_unavailable', 'The node is shutting down.'));
        }
      }
      waking.clear();
    },
  };
}
