import type { ConfigSnapshot, SnapshotUpstream } from '@infer/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SERVED, chatBody, deadUrl, makeSnapshot, memorySink, post, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

// Reliability 6: a replica that answers every chat request with 500 while its /health says 200.
let bad: StartedSim;
let good: StartedSim;
let dp: StartedApp;
const sink = memorySink();

const replica = (id: string, url: string): SnapshotUpstream => ({ id, url, kind: 'sim', servedModel: SERVED, apiKey: null });

beforeAll(async () => {
  bad = await startSim({ itlMs: 1, faults: { errorStatus: 500 } });
  good = await startSim({ itlMs: 1 });
  const snap: ConfigSnapshot = makeSnapshot({ sim: good.url, faulty: good.url, dead: await deadUrl() });
  snap.endpoints.find((e) => e.name === NAME)!.upstreams = [replica('r-bad', bad.url), replica('r-good', good.url)];
  dp = await startDataplane(snap, sink, { ejection: { failures: 3, cooldownMs: 150 } });
});
afterAll(async () => {
  await dp.app.close();
  await bad.sim.close();
  await good.sim.close();
});

const chatRequestsTo = (s: StartedSim): number => s.sim.stats().totals.requests;

describe('outlier detection on real traffic', () => {
  it('clients never see the 500s, and the replica comes back ever more rarely although /health says 200', async () => {
    expect((await fetch(`${bad.url}/health`)).status).toBe(200);
    const statuses: number[] = [];
    const started = Date.now();
    // Requests for about 3 s: with a fixed 150 ms cool-down and 3 failures per return the bad replica would
    // take about 60 of them; with growing ejections (150, 300, 600, 1200 ms...) and probation, about 8.
    let i = 0;
    while (Date.now() - started < 3000) {
      const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), undefined, { 'x-request-id': `ol-${i++}` });
      await res.text();
      statuses.push(res.status);
    }
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(statuses.length).toBeGreaterThan(20);
    const failedOnBad = chatRequestsTo(bad);
    expect(failedOnBad).toBeGreaterThanOrEqual(4); // ejected, back on probation at least once, ejected again
    expect(failedOnBad).toBeLessThanOrEqual(14);

    const m = await (await fetch(dp.metricsUrl)).text();
    const ejections = Number(/dataplane_replica_ejections_total\{upstream="r-bad"\} (\d+)/.exec(m)?.[1] ?? '0');
    expect(ejections).toBeGreaterThanOrEqual(2);
    expect(m).toMatch(/dataplane_retries_total\{reason="status_5xx"\} [1-9]/);
    // Every request was billed once, as a success.
    expect(sink.records.filter((r) => r.requestId.startsWith('ol-')).every((r) => r.status === 200)).toBe(true);
  });
});
