import { ApiError } from '@infer/shared';

/** Why a queued request gave up its place. */
export type QueueOutcome = 'full' | 'timeout' | 'aborted';

export class QueueRejection extends Error {
  readonly outcome: QueueOutcome;
  constructor(outcome: QueueOutcome) {
    super(outcome);
    this.outcome = outcome;
  }
}

interface Waiter {
  resolve: () => void;
  timer: NodeJS.Timeout | null;
  done: boolean;
}

interface Gate {
  active: number;
  /** Slots now: the latest capacity an acquire or a snapshot gave (replicas come and go). */
  capacity: number;
  /** FIFO: waiters[head..] (entries that gave up stay until they reach the head). */
  waiters: Waiter[];
  head: number;
  /** Waiters still waiting. */
  queued: number;
}

export interface ConcurrencyGate {
  /**
   * Takes one of `capacity` slots of `gateId`: null when one was free (no allocation), else a promise
   * that resolves in FIFO order when one frees, or rejects with a QueueRejection.
   */
  acquire(
    gateId: string,
    capacity: number,
    abort: { once(ev: 'close', fn: () => void): unknown; off(ev: 'close', fn: () => void): unknown } | null,
    /** Longest wait for this request (default: the queue's timeout). */
    timeoutMs?: number,
  ): Promise<void> | null;
  /**
   * Gives a slot back: to the next waiter when the gate's current capacity allows (not the capacity of the
   * moment the slot was taken: after a replica left, handing it on would overfill the ones that remain).
   */
  release(gateId: string): void;
  /** The target's capacity changed (a snapshot added or removed replicas): waiters take the new slots now. */
  resize(gateId: string, capacity: number): void;
  /** In-flight and queued counts (for tests and metrics). */
  stats(gateId: string): { active: number; queued: number };
}

export interface ConcurrencyGateOptions {
  readonly queueMax: number;
  readonly queueTimeoutMs: number;
}

/** Per-node, in-memory slots with a bounded FIFO queue and a deadline per waiter. */
export function createConcurrencyGate(opts: ConcurrencyGateOptions): ConcurrencyGate {
  const gates = new Map<string, Gate>();

  const nextWaiter = (g: Gate): Waiter | null => {
    while (g.head < g.waiters.length) {
      const w = g.waiters[g.head]!;
      g.waiters[g.head++] = undefined as unknown as Waiter;
      if (g.head > 1024 && g.head * 2 > g.waiters.length) {
        g.waiters = g.waiters.slice(g.head);
        g.head = 0;
      }
      if (!w.done) return w;
    }
    g.waiters.length = 0;
    g.head = 0;
    return null;
  };

  /** Hands free slots to waiters, in order. */
  const wake = (g: Gate): void => {
    while (g.queued > 0 && g.active < g.capacity) {
      const w = nextWaiter(g);
      if (w === null) return;
      g.active++;
      w.resolve();
    }
  };

  return {
    acquire(gateId, capacity, abort, timeoutMs = opts.queueTimeoutMs) {
      let g = gates.get(gateId);
      if (g === undefined) {
        g = { active: 0, capacity, waiters: [], head: 0, queued: 0 };
        gates.set(gateId, g);
      } else if (g.capacity !== capacity) {
        g.capacity = capacity;
        wake(g);
      }
      if (g.active < capacity && g.queued === 0) {
        g.active++;
        return null;
      }
      if (g.queued >= opts.queueMax) return Promise.reject(new QueueRejection('full'));
      const gate = g;
      return new Promise<void>((resolve, reject) => {
        const onAbort = (): void => giveUp('aborted');
        const giveUp = (outcome: QueueOutcome): void => {
          if (w.done) return;
          w.done = true;
          gate.queued--;
          if (w.timer !== null) clearTimeout(w.timer);
          abort?.off('close', onAbort);
          reject(new QueueRejection(outcome));
        };
        const w: Waiter = {
          resolve: () => {
            w.done = true;
            gate.queued--;
            if (w.timer !== null) clearTimeout(w.timer);
            abort?.off('close', onAbort);
            resolve();
          },
          timer: null,
          done: false,
        };
        w.timer = setTimeout(() => giveUp('timeout'), timeoutMs);
        abort?.once('close', onAbort);
        gate.waiters.push(w);
        gate.queued++;
      });
    },
    release(gateId) {
      const g = gates.get(gateId);
      if (g === undefined) return;
      g.active--;
      wake(g);
      if (g.active <= 0 && g.queued === 0) gates.delete(gateId);
    },
    resize(gateId, capacity) {
      const g = gates.get(gateId);
      if (g === undefined || g.capacity === capacity) return;
      g.capacity = capacity;
      wake(g);
    },
    stats(gateId) {
      const g = gates.get(gateId);
      return { active: g?.active ?? 0, queued: g?.queued ?? 0 };
    },
  };
}

/** The caller's error for a request the queue gave up on. */
export function queueError(outcome: QueueOutcome, capacity: number, queueMax: number, timeoutMs: number): ApiError | null {
  if (outcome === 'full') {
    return new ApiError(
      'concurrency_limit_exceeded',
      `This model is at its concurrency limit (${capacity} requests in flight) and its queue is full (${queueMax} waiting). Retry shortly.`,
      null,
      { 'retry-after': '1' },
    );
  }
  if (outcome === 'timeout') {
    return new ApiError(
      'service_unavailable',
      `This model is at its concurrency limit (${capacity} requests in flight); the request waited ${Math.round(timeoutMs / 100) / 10} s in the queue without getting a slot. Retry shortly.`,
      null,
      { 'retry-after': '1' },
    );
  }
  return null;
}
