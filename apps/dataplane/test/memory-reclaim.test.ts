import { describe, expect, it } from 'vitest';
import { memoryReducingGc, startMemoryReclaim } from '../src/memory-reclaim.ts';

const MiB = 1024 * 1024;

/** A reclaimer on a fake clock, load and heap; `at(ms, load)` samples once at that time. */
function rig(heap = { physical: 60 * MiB, used: 30 * MiB }) {
  let t = 0;
  let load = 0;
  let collected = 0;
  const r = startMemoryReclaim({
    load: () => load,
    now: () => t,
    heap: () => heap,
    collect: () => {
      collected++;
    },
    sampleMs: 3_600_000, // the test samples by hand
  });
  return {
    heap,
    collected: () => collected,
    at: async (ms: number, l: number): Promise<boolean> => {
      t = ms;
      load = l;
      return r.sample();
    },
    stop: () => r.stop(),
  };
}

describe('memory reclaim after a burst', () => {
  it('collects once when the load has fallen to a quarter of its peak for 5 s, not before', async () => {
    const g = rig();
    await g.at(0, 1000);
    await g.at(2500, 1000);
    expect(await g.at(5000, 10)).toBe(false); // just fell
    expect(await g.at(7500, 10)).toBe(false); // 2.5 s low
    expect(await g.at(10_000, 12)).toBe(true); // 5 s low
    expect(g.collected()).toBe(1);
    // Staying low, even long after: no second collection without a new rise.
    for (let ms = 12_500; ms <= 300_000; ms += 2500) await g.at(ms, 10);
    expect(g.collected()).toBe(1);
    g.stop();
  });

  it('never collects under steady load, high or low', async () => {
    const high = rig();
    for (let ms = 0; ms <= 300_000; ms += 2500) await high.at(ms, 1000 + (ms % 7) * 10);
    expect(high.collected()).toBe(0);
    const low = rig();
    for (let ms = 0; ms <= 300_000; ms += 2500) await low.at(ms, 20);
    expect(low.collected()).toBe(0);
    high.stop();
    low.stop();
  });

  it('a load that never reached 64 is no burst', async () => {
    const g = rig();
    await g.at(0, 60);
    for (let ms = 2500; ms <= 60_000; ms += 2500) await g.at(ms, 0);
    expect(g.collected()).toBe(0);
    g.stop();
  });

  it('a dip to above a quarter of the peak is not a drop', async () => {
    const g = rig();
    await g.at(0, 1000);
    for (let ms = 2500; ms <= 60_000; ms += 2500) await g.at(ms, 300);
    expect(g.collected()).toBe(0);
    g.stop();
  });

  it('at most once per 30 s, even for bursts that come and go faster', async () => {
    const g = rig();
    await g.at(0, 1000);
    await g.at(2500, 0);
    expect(await g.at(7500, 0)).toBe(true);
    // A new burst and drop right after: quiet for 5 s, but within 30 s of the last collection.
    await g.at(10_000, 800);
    await g.at(12_500, 0);
    expect(await g.at(17_500, 0)).toBe(false);
    expect(await g.at(35_000, 0)).toBe(false);
    expect(await g.at(37_500, 0)).toBe(true);
    expect(g.collected()).toBe(2);
    g.stop();
  });

  it('does not collect while V8 holds little more than it uses, and does once it holds more', async () => {
    const g = rig({ physical: 36 * MiB, used: 30 * MiB });
    await g.at(0, 1000);
    await g.at(2500, 0);
    expect(await g.at(7500, 0)).toBe(false);
    expect(await g.at(10_000, 0)).toBe(false);
    g.heap.physical = 50 * MiB;
    expect(await g.at(12_500, 0)).toBe(true);
    g.stop();
  });

  it('runs V8 memory-reducing GC without leaving a gc function on the global', () => {
    const before = typeof (globalThis as { gc?: unknown }).gc;
    const garbage = (): number => Array.from({ length: 100_000 }, (_, i) => ({ i })).length;
    expect(garbage()).toBe(100_000);
    memoryReducingGc();
    memoryReducingGc();
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe(before);
  });
});
