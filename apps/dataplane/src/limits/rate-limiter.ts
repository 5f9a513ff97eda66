import { performance } from 'node:perf_hooks';
import { SLOT_MS, SLOTS, advance, charge, createWindowCounter, msUntilFits, msUntilOldestExpires, refund } from './sliding-window.ts';
import type { WindowCounter } from './sliding-window.ts';

/** The outcome of one admission against a key's requests-per-minute and tokens-per-minute windows. */
export interface RateDecision {
  readonly admitted: boolean;
  readonly rpmLimit: number | null;
  readonly tpmLimit: number | null;
  /** Requests and tokens in the window after the decision (this request included when admitted). */
  readonly requestsUsed: number;
  readonly tokensUsed: number;
  /** Until the request fits (when that window refused it), else until its oldest charge expires. */
  readonly resetRequestsMs: number;
  readonly resetTokensMs: number;
  /** Refused: until every refusing window has room. */
  readonly retryAfterMs: number;
  /** The sub-window the reservation was charged to (settlement refunds there). */
  readonly slot: number;
  readonly store: 'memory' | 'redis';
}

/** Check-and-reserve of RPM/TPM, then settlement with the real usage. */
export interface RateLimiter {
  /** Admits one request costing `tokens` when both windows have room, reserving it; refuses otherwise. */
  reserve(keyId: string, rpm: number | null, tpm: number | null, tokens: number): RateDecision | Promise<RateDecision>;
  /** Gives the request back (`refundRequest`, when it was never served) and corrects tokens by `tokenDelta` (actual - reserved). */
  settle(keyId: string, d: RateDecision, refundRequest: boolean, tokenDelta: number): void;
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
    reserve(keyId, rpm, tpm, tokens) {
      const nowMs = now();
      const cur = Math.floor(nowMs / SLOT_MS);
      const w = windowsOf(keyId, cur);
      advance(w.requests, cur);
      advance(w.tokens, cur);
      const waitR = rpm === null ? 0 : msUntilFits(w.requests, nowMs, cur, 1, rpm);
      const waitT = tpm === null ? 0 : msUntilFits(w.tokens, nowMs, cur, tokens, tpm);
      const admitted = waitR === 0 && waitT === 0;
      if (admitted) {
        if (rpm !== null) charge(w.requests, cur, 1);
        if (tpm !== null && tokens > 0) charge(w.tokens, cur, tokens);
      }
      return {
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
    },
    settle(keyId, d, refundRequest, tokenDelta) {
      const w = keys.get(keyId);
      if (w === undefined) return;
      const cur = Math.floor(now() / SLOT_MS);
      if (refundRequest && d.rpmLimit !== null) refund(w.requests, cur, d.slot, 1);
      if (d.tpmLimit === null || tokenDelta === 0) return;
      if (tokenDelta < 0) {
        refund(w.tokens, cur, d.slot, -tokenDelta);
      } else {
        // Used more than reserved: the excess counts now, so the next requests wait for it.
        advance(w.tokens, cur);
        charge(w.tokens, cur, tokenDelta);
      }
    },
    async close() {
      clearInterval(sweep);
      keys.clear();
    },
  };
}
