import { describe, expect, it } from 'vitest';
import type { ResolvedUpstream } from '../config/config-view.ts';
import { defaultOutlierPolicy, eject, mayEject, newOutlierState, recordFailure, recordSuccess } from './outlier-detector.ts';
import { createUpstreamPools, defaultTimeouts } from './upstream-pools.ts';

const policy = { ...defaultOutlierPolicy, failures: 3, cooldownMs: 100, maxEjectionMs: 1000 };
const upstream = (n: number): ResolvedUpstream => ({
  id: `r-${n}`,
  kind: 'sim',
  origin: `http://10.255.0.${n}:8000`,
  chatPath: '/v1/chat/completions',
  servedModel: 'm',
  authorization: null,
});

describe('outlier detection', () => {
  it('ejects on consecutive failures, and on a failure rate that never reaches them', () => {
    const st = newOutlierState(policy);
    expect(recordFailure(st, policy)).toBe(false);
    expect(recordFailure(st, policy)).toBe(false);
    expect(recordFailure(st, policy)).toBe(true);

    const rate = newOutlierState(policy);
    let ejectAt = -1;
    for (let i = 0; i < 20 && ejectAt < 0; i++) {
      // fail, ok, fail, ok...: never two in a row, but half the traffic fails
      if (i % 2 === 0 ? recordFailure(rate, policy) : (recordSuccess(rate, policy), false)) ejectAt = i;
    }
    expect(ejectAt).toBeGreaterThanOrEqual(policy.minRequests - 1);
  });

  it('each ejection lasts twice the last, up to the cap; a long clean run forgives one', () => {
    const st = newOutlierState(policy);
    expect([eject(st, policy), eject(st, policy), eject(st, policy), eject(st, policy), eject(st, policy)]).toEqual([100, 200, 400, 800, 1000]);
    for (let i = 0; i < policy.windowSize * 2; i++) recordSuccess(st, policy);
    expect(st.ejections).toBe(4);
  });

  it('a replica back on probation is ejected again by its first failure', () => {
    const st = newOutlierState(policy);
    eject(st, policy);
    st.probation = true;
    expect(recordFailure(st, policy)).toBe(true);
  });

  it('never ejects the last replica in rotation, nor more than the max share', () => {
    expect(mayEject(0, 1, policy)).toBe(false);
    expect(mayEject(0, 2, policy)).toBe(true);
    expect(mayEject(1, 2, policy)).toBe(false);
    expect(mayEject(1, 4, policy)).toBe(true);
    expect(mayEject(2, 4, policy)).toBe(false);
  });

  it('pools: with two failing replicas only one is ejected, and a lone replica never is', async () => {
    const ejected: string[] = [];
    const pools = createUpstreamPools({ timeouts: defaultTimeouts, ejection: { ...policy, cooldownMs: 60_000 }, onEject: (_o, id) => ejected.push(id) });
    try {
      const both = [upstream(1), upstream(2)];
      for (let i = 0; i < 10; i++) for (const u of both) pools.failed(pools.get(u.origin), u, both);
      expect(ejected).toEqual(['r-1']);
      expect(pools.pick(both, null)).toEqual(upstream(2));
      const lone = [upstream(3)];
      for (let i = 0; i < 10; i++) pools.failed(pools.get(lone[0]!.origin), lone[0]!, lone);
      expect(ejected).toEqual(['r-1']);
    } finally {
      await pools.close();
    }
  });
});
