import type { ConfigSnapshot } from '@infer/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, deadUrl, makeSnapshot, memorySink, post, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

// Issue 12: a replica's pool used to cap at 256 connections whatever the node admitted, so streams past the
// 256th waited unseen for a socket. With REPLICA_BASE_CONCURRENCY 96 x Concurrency 4 = 384 admitted, 320
// concurrent streams must all be at the runtime at once and all get their first byte.
let sim: StartedSim;
let dp: StartedApp;
const STREAMS = 320;

beforeAll(async () => {
  // 600 tokens 100 ms apart: each stream would last 60 s, far longer than opening them all takes (they are aborted).
  sim = await startSim({ itlMs: 100, batchSlots: 512, maxQueue: 0 });
  const snap: ConfigSnapshot = makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() });
  snap.endpoints.find((e) => e.name === NAME)!.concurrency = 4;
  dp = await startDataplane(snap, memorySink(), { limits: { replicaBaseConcurrency: 96, queueMax: 0 } });
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

describe('upstream pool sized from the admitted concurrency', () => {
  it(`carries ${STREAMS} concurrent streams to one replica at once: every one gets its first byte, none waits for a connection`, async () => {
    const controller = new AbortController();
    const body = (i: number) => ({ model: NAME, stream: true, max_tokens: 600, messages: [{ role: 'user', content: `stream ${i}` }] });
    const responses = Array.from({ length: STREAMS }, (_, i) =>
      fetch(`${dp.url}/endpoints/v1/chat/completions`, {
        method: 'POST',
        signal: controller.signal,
        headers: { 'content-type': 'application/json', authorization: `Bearer infk_test_tenant_a_key_0000000000000` },
        body: JSON.stringify(body(i)),
      }),
    );
    // Aborted at the end on purpose: a rejection there is expected.
    for (const r of responses) r.catch(() => {});
    try {
      // All of them at the runtime at the same time (with the old 256-connection cap this stops at 256).
      await waitFor(() => sim.sim.stats().running === STREAMS, 50_000).catch((err: unknown) => {
        const st = sim.sim.stats();
        throw new Error(`${String(err)}: runtime running ${st.running}, requests ${st.totals.requests}, peak ${st.peakRunning}`);
      });
      const firstChunks = await Promise.all(
        responses.map(async (p) => {
          const res = await p;
          expect(res.status).toBe(200);
          const reader = res.body!.getReader();
          const { value } = await reader.read();
          reader.read().catch(() => {}); // the abort at the end rejects the next read
          return new TextDecoder().decode(value);
        }),
      );
      expect(firstChunks.every((c) => c.startsWith('data: '))).toBe(true);
      // Still all running: nobody got its first byte by waiting for another stream to end.
      expect(sim.sim.stats().totals.completed).toBe(0);
      const m = await (await fetch(dp.metricsUrl)).text();
      expect(m).not.toMatch(/dataplane_upstream_connection_waits_total\{/);
      // The gauge counts everything queued in the pool, the routing scraper's /metrics call included, which is
      // briefly pending while its own socket connects: with 320 streams still open it must come back to 0.
      const settled = /dataplane_upstream_waiting_for_connection\{replica="u-1"\} 0\n/;
      let last = '';
      for (const deadline = Date.now() + 10_000; !settled.test(last) && Date.now() < deadline;) {
        last = await (await fetch(dp.metricsUrl)).text();
        if (!settled.test(last)) await new Promise((r) => setTimeout(r, 50));
      }
      expect(last).toMatch(settled);
    } finally {
      controller.abort();
    }
  }, 90_000);

  it('serves a plain request once the streams are gone', async () => {
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, { model: NAME, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(200);
    await res.json();
  });
});
