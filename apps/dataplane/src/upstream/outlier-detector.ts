/**
 * Outlier detection on real traffic, after Envoy's: a replica is ejected on consecutive failures or on a high
 * failure rate over its recent requests, not only when its health route says so (a replica can answer
 * `/health` with 200 and every chat request with 500). Each ejection lasts longer than the last
 * (base x 2^(n-1), capped), a returning replica is on probation (its first failure ejects it again), and
 * ejections never take out more than a share of a target's replicas, so at least one always stays.
 */
export interface OutlierPolicy {
  /** Consecutive failures (connect errors, 5xx, timeouts, cut streams) that eject a replica. */
  readonly failures: number;
  /** First ejection time; each further one doubles it, ms. Also the pause between health probes. */
  readonly cooldownMs: number;
  /** Longest ejection, ms. */
  readonly maxEjectionMs: number;
  /** Failure share (percent) over the last `windowSize` requests that ejects a replica... */
  readonly errorRatePercent: number;
  /** ...once at least this many requests are in that window. */
  readonly minRequests: number;
  readonly windowSize: number;
  /** Most of a target's replicas (percent) ejected at once; one may always be ejected when there are two or more. */
  readonly maxEjectionPercent: number;
}

export const defaultOutlierPolicy: OutlierPolicy = Object.freeze({
  failures: 3,
  cooldownMs: 10_000,
  maxEjectionMs: 300_000,
  errorRatePercent: 50,
  minRequests: 10,
  windowSize: 20,
  maxEjectionPercent: 50,
});

/** One replica's recent outcomes and ejection history. */
export interface OutlierState {
  /** Consecutive failures since the last success. */
  consecutive: number;
  /** Ring of the last `windowSize` outcomes (1: failure). */
  readonly ring: Uint8Array;
  pos: number;
  count: number;
  failuresInWindow: number;
  /** Ejections so far (decays after a long run of successes): sets the next ejection's length. */
  ejections: number;
  successStreak: number;
  /** Back from an ejection and not yet proven by a success. */
  probation: boolean;
}

export const newOutlierState = (p: OutlierPolicy): OutlierState => ({
  consecutive: 0,
  ring: new Uint8Array(p.windowSize),
  pos: 0,
  count: 0,
  failuresInWindow: 0,
  ejections: 0,
  successStreak: 0,
  probation: false,
});

function push(st: OutlierState, failed: 0 | 1): void {
  if (st.count === st.ring.length) st.failuresInWindow -= st.ring[st.pos]!;
  else st.count++;
  st.ring[st.pos] = failed;
  st.failuresInWindow += failed;
  st.pos = (st.pos + 1) % st.ring.length;
}

/** Records a request the replica did its job on. */
export function recordSuccess(st: OutlierState, p: OutlierPolicy): void {
  st.consecutive = 0;
  st.probation = false;
  push(st, 0);
  // A long clean run forgives one past ejection.
  if (st.ejections > 0 && ++st.successStreak >= p.windowSize * 2) {
    st.ejections--;
    st.successStreak = 0;
  }
}

/** Records a failed request; true when the replica should now be ejected. */
export function recordFailure(st: OutlierState, p: OutlierPolicy): boolean {
  st.consecutive++;
  st.successStreak = 0;
  push(st, 1);
  if (st.probation || st.consecutive >= p.failures) return true;
  return st.count >= p.minRequests && st.failuresInWindow * 100 >= p.errorRatePercent * st.count;
}

/** Marks an ejection; returns how long it lasts, ms. */
export function eject(st: OutlierState, p: OutlierPolicy): number {
  st.ejections++;
  st.consecutive = 0;
  st.count = 0;
  st.pos = 0;
  st.failuresInWindow = 0;
  st.probation = false;
  return Math.min(p.maxEjectionMs, p.cooldownMs * 2 ** Math.min(30, st.ejections - 1));
}

/** True when one more of `total` replicas may be ejected while `ejected` already are. */
export function mayEject(ejected: number, total: number, p: OutlierPolicy): boolean {
  if (total < 2 || ejected + 1 >= total) return false;
  return ejected === 0 || (ejected + 1) * 100 <= p.maxEjectionPercent * total;
}
