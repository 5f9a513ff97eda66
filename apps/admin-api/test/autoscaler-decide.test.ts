import { describe, expect, it } from 'vitest';
import { decide, newMemory, type DecisionInput, type ScalerMemory, type ScalingSettings } from '../src/modules/deployments/autoscaler/decide.ts';

const W = { stableWindowMs: 60_000, panicWindowMs: 6_000, panicThreshold: 2 };
const S: ScalingSettings = { minReplicas: 0, maxReplicas: 10, targetConcurrency: 8, scaleToZeroAfterMs: 900_000, scaleDownDelayMs: 60_000 };

/** Feeds one load sample per second from `from` for `seconds`, applying each decision; returns the last. */
function run(state: { memory: ScalerMemory; current: number; ready?: number }, from: number, seconds: number, load: number, settings = S, held = 0) {
  let last = null as ReturnType<typeof decide> | null;
  for (let i = 0; i < seconds; i++) {
    const input: DecisionInput = {
      now: from + i * 1000,
      load,
      held,
      current: state.current,
      readyReplicas: state.ready ?? state.current,
      settings,
      windows: W,
      memory: state.memory,
    };
    last = decide(input);
    state.memory = last.memory;
    state.current = last.desired;
  }
  return last!;
}

describe('autoscaler decision (pure)', () => {
  it('desired = ceil(load / target) over the stable window, clamped to max', () => {
    const s = { memory: newMemory(0), current: 3 };
    run(s, 0, 60, 24);
    expect(s.current).toBe(3);
    const t = { memory: newMemory(0), current: 1 };
    const d = run(t, 0, 70, 40, { ...S, maxReplicas: 4 });
    expect(d.desired).toBe(4);
  });

  it('wakes 0 -> 1 at once when a request is held, with a reason', () => {
    const d = decide({ now: 1000, load: 1, held: 1, current: 0, readyReplicas: 0, settings: S, windows: W, memory: newMemory(0) });
    expect(d.desired).toBe(1);
    expect(d.reason).toMatch(/^0 -> 1: /);
  });

  it('panics when the 6 s load needs twice the ready replicas: scales up at once and never down while panicking', () => {
    const s = { memory: newMemory(0), current: 1 };
    run(s, 0, 30, 4); // calm: 1 replica for load 4 (target 8)
    expect(s.current).toBe(1);
    // Three seconds of load 80: the stable average (60 s) says 2 replicas, the panic window (6 s) says 6.
    const up = run(s, 30_000, 3, 80);
    expect(up.panicking).toBe(true);
    expect(s.current).toBeGreaterThanOrEqual(5);
    const peak = s.current;
    const calm = run(s, 33_000, 20, 0); // load gone, still inside the panic period: no scale-down
    expect(calm.panicking).toBe(true);
    expect(s.current).toBe(peak);
  });

  it('scales down only after scaleDownDelay below, and at most halfway per step', () => {
    const s = { memory: newMemory(0), current: 8 };
    run(s, 0, 61, 64); // steady at 8
    expect(s.current).toBe(8);
    const settings = { ...S, scaleDownDelayMs: 10_000 };
    const t0 = 61_000;
    run(s, t0, 5, 8, settings); // stable average still high for a while
    expect(s.current).toBe(8);
    // Low load for a long time: every step at most halves.
    const seen: number[] = [];
    for (let i = 0; i < 200; i++) {
      const d = run(s, t0 + 5_000 + i * 1000, 1, 8, settings);
      if (d.reason) seen.push(d.desired);
    }
    expect(s.current).toBe(1);
    let prev = 8;
    for (const n of seen) {
      expect(n).toBeGreaterThanOrEqual(Math.ceil(prev / 2));
      prev = n;
    }
    expect(seen.length).toBeGreaterThan(1);
  });

  it('keeps the minimum and scales to zero only after scaleToZeroAfter with nothing in flight or held', () => {
    const settings = { ...S, scaleToZeroAfterMs: 30_000, scaleDownDelayMs: 0 };
    const s = { memory: newMemory(0), current: 1 };
    run(s, 0, 29, 0, settings);
    expect(s.current).toBe(1);
    const held = run(s, 29_000, 5, 0, settings, 1); // a held request is activity
    expect(held.desired).toBe(1);
    run(s, 34_000, 29, 0, settings);
    expect(s.current).toBe(1);
    const zero = run(s, 63_000, 1, 0, settings);
    expect(s.current).toBe(0);
    expect(zero.reason).toMatch(/idle for/);
    const kept = { memory: newMemory(0), current: 2 };
    run(kept, 0, 200, 0, { ...settings, minReplicas: 2 });
    expect(kept.current).toBe(2);
  });

  it('stays at zero while idle: load samples left in the windows from before the scale-down wake nothing', () => {
    // Short scale-to-zero (10 s) inside the 60 s stable window: the window still averages the last requests' load
    // when the deployment reaches zero, and a panic period may still be running.
    const settings = { ...S, targetConcurrency: 1, scaleToZeroAfterMs: 10_000, scaleDownDelayMs: 0 };
    const s = { memory: newMemory(0), current: 1 };
    run(s, 0, 5, 4, settings); // busy: 4 in flight on 1 replica (panic)
    run(s, 5_000, 120, 0, settings); // then nothing for two minutes
    expect(s.current).toBe(0);
    const moves: string[] = [];
    for (let i = 0; i < 120; i++) {
      const d = run(s, 125_000 + i * 1000, 1, 0, settings);
      if (d.reason !== null) moves.push(d.reason);
    }
    expect(moves).toEqual([]);
    expect(s.current).toBe(0);
    // From the first idle tick at zero too (the tick right after the scale-down).
    const t = { memory: newMemory(0), current: 1 };
    const seen: string[] = [];
    for (let i = 0; i < 90; i++) {
      const d = run(t, i * 1000, 1, i < 3 ? 2 : 0, settings);
      if (d.reason !== null) seen.push(d.reason);
    }
    expect(seen.filter((r) => r.startsWith('0 -> '))).toEqual([]);
    expect(t.current).toBe(0);
    // A request after that still wakes one replica at once, however busy the windows' older samples were.
    const busy = { memory: newMemory(0), current: 8 };
    run(busy, 0, 10, 8, { ...settings, targetConcurrency: 1 });
    run(busy, 10_000, 15, 0, settings);
    expect(busy.current).toBe(0);
    expect(run(busy, 25_000, 1, 1, settings).desired).toBe(1);
    const wake = run(t, 90_000, 1, 1, settings);
    expect(wake.desired).toBe(1);
    expect(wake.reason).toMatch(/^0 -> 1: requests arrived with no replica/);
  });
});
