// The autoscaler's decision, Knative-style (docs/autoscaling.md): a pure function of the load samples
// it has seen, so it is tested without processes or clocks.

export interface ScalingWindows {
  /** Averaging window of the stable mode (default 60 s). */
  readonly stableWindowMs: number;
  /** Averaging window of the panic mode (default 6 s). */
  readonly panicWindowMs: number;
  /** Panic when the panic-window load needs this many times the ready replicas (default 2). */
  readonly panicThreshold: number;
}

export const DEFAULT_WINDOWS: ScalingWindows = Object.freeze({ stableWindowMs: 60_000, panicWindowMs: 6_000, panicThreshold: 2 });

export interface ScalingSettings {
  readonly minReplicas: number;
  readonly maxReplicas: number;
  /** Requests one replica should carry at once (resolved, >= 1). */
  readonly targetConcurrency: number;
  readonly scaleToZeroAfterMs: number;
  readonly scaleDownDelayMs: number;
}

/** What the autoscaler remembers of one deployment between ticks (the leader's memory; a new leader starts afresh). */
export interface ScalerMemory {
  readonly createdAt: number;
  /** Load samples (in flight + held, over all nodes), oldest first, at most one stable window old. */
  readonly samples: readonly { readonly at: number; readonly load: number }[];
  /** Unclamped recommendations, oldest first, at most one scale-down delay old. */
  readonly recommendations: readonly { readonly at: number; readonly desired: number }[];
  /** Last time a request was in flight or held (or the deployment was woken). */
  readonly lastActiveAt: number;
  /** Panic mode lasts until this time (a stable window after the last panic-worthy load); null when calm. */
  readonly panicUntil: number | null;
}

export function newMemory(now: number): ScalerMemory {
  return { createdAt: now, samples: [], recommendations: [], lastActiveAt: now, panicUntil: null };
}

export interface DecisionInput {
  readonly now: number;
  /** Requests in flight plus requests held, summed over nodes (and the runtimes' own gauges, whichever is higher). */
  readonly load: number;
  /** Requests held waiting for a ready replica. */
  readonly held: number;
  /** The current desired count. */
  readonly current: number;
  readonly readyReplicas: number;
  readonly settings: ScalingSettings;
  readonly windows?: ScalingWindows;
  readonly memory: ScalerMemory;
}

export interface Decision {
  readonly desired: number;
  /** Why, when `desired` differs from the current count; null when unchanged. */
  readonly reason: string | null;
  readonly panicking: boolean;
  readonly memory: ScalerMemory;
}

const avg = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
const fmt = (n: number): string => (Number.isInteger(n) ? String(n) : n.toFixed(1));
const secs = (ms: number): string => `${fmt(ms / 1000)} s`;

/**
 * desired = ceil(load / targetConcurrency), averaged over the stable window; while panicking (the panic
 * window's load needs >= panicThreshold x the ready replicas) it follows the panic window up and never
 * goes down. Down moves wait until every recommendation of the last scaleDownDelay was lower, and go at
 * most halfway per step. Result clamped to [min, max]. Zero only after scaleToZeroAfter with no request
 * in flight or held; any load at zero wakes one replica at once.
 */
export function decide(input: DecisionInput): Decision {
  const { now, settings: s, current } = input;
  const w = input.windows ?? DEFAULT_WINDOWS;
  const load = Math.max(0, input.load);
  const active = load > 0 || input.held > 0;
  const samples = [...input.memory.samples.filter((x) => x.at > now - w.stableWindowMs), { at: now, load }];
  const lastActiveAt = active ? now : input.memory.lastActiveAt;
  const target = Math.max(1, s.targetConcurrency);

  const stableLoad = avg(samples.map((x) => x.load));
  const panicLoad = avg(samples.filter((x) => x.at > now - w.panicWindowMs).map((x) => x.load));
  const stableWant = Math.ceil(stableLoad / target);
  const panicWant = Math.ceil(panicLoad / target);

  let panicUntil = input.memory.panicUntil !== null && now < input.memory.panicUntil ? input.memory.panicUntil : null;
  if (panicWant > 0 && panicWant / Math.max(1, input.readyReplicas) >= w.panicThreshold) panicUntil = now + w.stableWindowMs;
  const panicking = panicUntil !== null;

  let raw = panicking ? Math.max(current, panicWant) : stableWant;
  let why = panicking
    ? `panic: load ${fmt(panicLoad)} over ${secs(w.panicWindowMs)} needs ${panicWant} x target ${target}`
    : `load ${fmt(stableLoad)} over ${secs(w.stableWindowMs)} / target ${target}`;
  if (current === 0 && active) {
    // Sized by the load now: what the windows still hold from before the scale-down is no demand.
    raw = Math.max(1, Math.ceil(load / target));
    why = input.held > 0 ? `${input.held} request(s) held with no replica` : 'requests arrived with no replica';
  } else if (current === 0 && !active) {
    // At zero only a request in flight or held wakes a replica. The windows still average the load of the requests
    // before the scale-down (a scale-to-zero shorter than the stable window), which is no demand now: following it
    // booted a replica again and again with no traffic, each boot billed as GPU time.
    raw = 0;
  }

  const recommendations = [...input.memory.recommendations.filter((x) => x.at > now - s.scaleDownDelayMs), { at: now, desired: raw }];
  let desired = raw;
  if (desired < current) {
    // Down only when the whole delay window agrees, never while panicking, and at most halfway.
    const known = now - input.memory.createdAt >= s.scaleDownDelayMs;
    const windowMax = Math.max(...recommendations.map((x) => x.desired));
    desired = panicking || !known ? current : Math.max(windowMax, Math.ceil(current / 2));
    if (desired < current) why = `${why}; down at most halfway after ${secs(s.scaleDownDelayMs)} below`;
  }
  desired = Math.min(Math.max(desired, s.minReplicas), s.maxReplicas);

  if (s.minReplicas === 0 && !active && current > 0 && now - lastActiveAt >= s.scaleToZeroAfterMs) {
    desired = 0;
    why = `idle for ${secs(now - lastActiveAt)} (scale to zero after ${secs(s.scaleToZeroAfterMs)})`;
  } else if (desired === 0 && current > 0) {
    desired = Math.min(current, Math.max(1, s.minReplicas)); // not idle long enough for zero
  }

  const memory: ScalerMemory = { createdAt: input.memory.createdAt, samples, recommendations, lastActiveAt, panicUntil };
  if (desired === current) return { desired, reason: null, panicking, memory };
  const clamped =
    desired === s.maxReplicas && raw > s.maxReplicas
      ? ` (max ${s.maxReplicas})`
      : desired === s.minReplicas && raw < s.minReplicas
        ? ` (min ${s.minReplicas})`
        : '';
  return { desired, reason: `${current} -> ${desired}: ${why}${clamped}`, panicking, memory };
}
