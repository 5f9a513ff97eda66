import { performance } from 'node:perf_hooks';
import { SLOT_MS, SLOTS, advance, charge, createWindowCounter, msUntilFits, msUntilOldestExpires, refund } from './sliding-window.ts';
import type { WindowCounter } from './sliding-window.ts';

/** The outcome of one admission for one window (a key's or a tenant's requests-per-minute and tokens-per-minute). */
export interface RateDecision {
  /** The request was admitted: every window it asked had room, and each was charged. */
  readonly admitted: boolean;
  readonly rpmLimit: number | null;
  readonly tpmLimit: number | null;
  /** Requests and tokens in this window after the decision (this request included when admitted). */
  readonly requestsUsed: number;
  readonly tokensUsed: number;
  /** Until the request fits (when this window had no room), else until its oldest charge expires. */
  readonly resetRequestsMs: number;
  readonly resetTokensMs: number;
  /** Until this window has room for the request: 0 when it has room now (so, refused: > 0 on each window that refused). */
  readonly retryAfterMs: number;
  /** The sub-window the reservation was charged to (settlement refunds there). */
  readonly slot: number;
  readonly store: 'memory' | 'redis';
}

/** One window a request asks for room in: its key's, or its tenant's (all the tenant's keys together). */
export interface WindowLimits {
  readonly id: string;
  readonly rpm: number | null;
  readonly tpm: number | null;
}

/** One window a request was charged to, and its decision (settlement refunds into its slot). */
export interface Charge {
  readonly id: string;
  readonly d: RateDecision;
}

/** Check-and-reserve of RPM/TPM over one or more windows, then settlement with the real usage. */
export interface RateLimiter {
  /**
   * Admits one request costing `tokens` when every window has room for it, charging all of them; otherwise charges
   * none (all or nothing, atomically: no other admission sees a window charged for a request another window refused).
   * One decision per window, in order, all from the same store.
   */
  reserve(windows: readonly WindowLimits[], tokens: number): readonly RateDecision[] | Promise<readonly RateDecision[]>;
  /**
   * Settles the windows one admission charged: gives the request back (`refundRequest`, when it was never served)
   * and corrects tokens by `tokenDelta` (actual - reserved).
   */
  settle(charges: readonly Charge[], refundRequest: boolean, tokenDelta: number): void;
  close(): Promise<void>;
}

interface KeyWindows {
  readonly requests: WindowCounter;
  readonly tokens: WindowCounter;
  lastSlot: number;
}

/** Wall-clock ms that never goes backwards within the process. */
export const monotonicNow = (): number => performance.timeOrigin + performance.now();

/** One node's limiter: O(1) per admission, no I/O. Idle keys are dropped once their window is empty. */
export function createMemoryRateLimiter(now: () => number = monotonicNow): RateLimiter {
  const keys = new Map<string, KeyWindows>();
  const sweep = setInterval(() => {
    const stale = Math.floor(now() / SLOT_MS) - SLOTS;
    for (const [id, w] of keys) if (w.lastSlot < stale) keys.delete(id);
  }, 60_000);
  sweep.unref();

  const windowsOf = (keyId: string, cur: number): KeyWindows => {
    let w = keys.get(keyId);
    if (w === undefined) {
      w = { requests: createWindowCounter(), tokens: createWindowCounter(), lastSlot: cur };
      keys.set(keyId, w);
    }
    w.lastSlot = cur;
    return w;
  };

  return {
    reserve(windows, tokens) {
      const nowMs = now();
      const cur = Math.floor(nowMs / SLOT_MS);
      const n = windows.length;
      const held: KeyWindows[] = new Array(n);
      const waits: number[] = new Array(2 * n);
      let admitted = true;
      for (let i = 0; i < n; i++) {
        const { id, rpm, tpm } = windows[i]!;
        const w = (held[i] = windowsOf(id, cur));
        advance(w.requests, cur);
        advance(w.tokens, cur);
        const waitR = (waits[2 * i] = rpm === null ? 0 : msUntilFits(w.requests, nowMs, cur, 1, rpm));
        const waitT = (waits[2 * i + 1] = tpm === null ? 0 : msUntilFits(w.tokens, nowMs, cur, tokens, tpm));
        if (waitR > 0 || waitT > 0) admitted = false;
      }
      const decisions: RateDecision[] = new Array(n);
      for (let i = 0; i < n; i++) {
        const { rpm, tpm } = windows[i]!;
        const w = held[i]!;
        if (admitted) {
          if (rpm !== null) charge(w.requests, cur, 1);
          if (tpm !== null && tokens > 0) charge(w.tokens, cur, tokens);
        }
        const waitR = waits[2 * i]!;
        const waitT = waits[2 * i + 1]!;
        decisions[i] = {
          admitted,
          rpmLimit: rpm,
          tpmLimit: tpm,
          requestsUsed: w.requests.total,
          tokensUsed: w.tokens.total,
          resetRequestsMs: waitR > 0 ? waitR : msUntilOldestExpires(w.requests, nowMs, cur),
          resetTokensMs: waitT > 0 ? waitT : msUntilOldestExpires(w.tokens, nowMs, cur),
          retryAfterMs: Math.max(waitR, waitT),
          slot: cur,
          store: 'memory',
        };
      }
      return decisions;
    },
    settle(charges, refundRequest, tokenDelta) {
      const cur = Math.floor(now() / SLOT_MS);
      for (const { id, d } of charges) {
        const w = keys.get(id);
        if (w === undefined) continue;
        if (refundRequest && d.rpmLimit !== null) refund(w.requests, cur, d.slot, 1);
        if (d.tpmLimit === null || tokenDelta === 0) continue;
        if (tokenDelta < 0) {
          refund(w.tokens, cur, d.slot, -tokenDelta);
        } else {
          // Used more than reserved: the excess counts now, so the next requests wait for it.
          advance(w.tokens, cur);
          charge(w.tokens, cur, tokenDelta);
        }
      }
    },
    async close() {
      clearInterval(sweep);
      keys.clear();
    },
  };
}
