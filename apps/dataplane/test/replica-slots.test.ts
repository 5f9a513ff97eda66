// Issue 10: "no replica ever has more than its concurrency in flight", counted by the runtimes themselves, with
// the default routing policy, retries on another replica, outlier ejection, JSON clients that leave (their runtime
// requests run on) and a replica that leaves the snapshot and comes back while its requests still run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecret } from '@infer/shared';
import type { ConfigSnapshot, SnapshotUpstream } from '@infer/shared';
import { memorySink, SERVED, startDataplane, startSim, type StartedApp, type StartedSim } from './helpers.ts';

const SECRET = 'infk_replica_slots_key_000000000000000';
const CAP = 3;
const BURST = 90;

const upstream = (id: string, url: string): SnapshotUpstream => ({ id, url, kind: 'sim', servedModel: SERVED, apiKey: null });

function snapshot(version: number, replicas: SnapshotUpstream[]): ConfigSnapshot {
  return {
    version,
    tenants: [{ id: 't-s', slug: 'slots', rpmLimit: null, tpmLimit: null }],
    keys: [{ id: 'k-s', tenantId: 't-s', hash: hashSecret(SECRET), prefix: SECRET.slice(0, 12), expiresAt: null, rpmLimit: null, tpmLimit: null }],
    endpoints: [
      {
        id: 'e-s',
        name: 'slots-model',
        provider: 'meta',
        contextLength: 8192,
        concurrency: 1,
        coldStartSeconds: 1,
        offeredShared: false,
        offeredDedicated: true,
        published: true,
        priceInputPerM: 0,
        priceOutputPerM: 0,
        upstreams: [],
      },
    ],
    deployments: [
      {
        id: 'd-s',
        tenantId: 't-s',
        tenantSlug: 'slots',
        endpointId: 'e-s',
        endpointName: 'slots-model',
        provider: 'meta',
        state: 'running',
        replicas,
        minReplicas: 1,
        maxReplicas: 3,
        // The deployment's own concurrency, far below the node's REPLICA_BASE_CONCURRENCY (32): the snapshot's wins.
        targetConcurrency: CAP,
        desiredReplicas: replicas.length,
        coldStartSeconds: 1,
        measuredColdStartSeconds: null,
      },
    ],
  };
}

async function waitFor(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('per-replica concurrency slots', () => {
  let sims: StartedSim[] = [];
  let node: StartedApp;
  let replicas: SnapshotUpstream[] = [];

  beforeAll(async () => {
    // Batch slots above the cap: a runtime would run whatever it is sent; only the node keeps it to CAP.
    sims = await Promise.all([0, 1, 2].map(() => startSim({ ttftMs: 5, itlMs: 8, batchSlots: 64 })));
    // The third fails half its requests with 503: retried on another replica, then ejected.
    sims[2]!.sim.setFaults({ errorStatus: 503, errorRate: 0.5 });
    replicas = sims.map((s, i) => upstream(`r-${i}`, s.url));
    node = await startDataplane(snapshot(1, replicas), memorySink(), {
      limits: { queueMax: 500, queueTimeoutMs: 60_000 },
      ejection: { failures: 2, cooldownMs: 60_000 },
    });
  });

  afterAll(async () => {
    await node?.app.close();
    await Promise.all(sims.map((s) => s.sim.close()));
  });

  it(`${BURST} concurrent requests on three replicas of concurrency ${CAP}: no runtime ever has more than ${CAP} in flight`, async () => {
    const url = `${node.url}/funccall/slots/endpoints/slots-model/v1/chat/completions`;
    const send = (i: number, signal?: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        signal,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET}` },
        // Distinct prompts of a few shared prefixes: the scorer's prefix affinity would pile them on one replica.
        body: JSON.stringify({
          messages: [{ role: 'user', content: `${'shared context '.repeat(20)}${i % 3} request ${i}` }],
          max_tokens: 6 + (i % 5),
          stream: i % 4 === 0,
        }),
      }).then(async (r) => ({ status: r.status, text: await r.text() }));

    // Every tenth client leaves soon after sending: its JSON request keeps running on the runtime.
    const leavers = Array.from({ length: BURST / 10 }, () => new AbortController());
    const all = Array.from({ length: BURST }, (_, i) =>
      i % 10 === 5 ? send(i, leavers[(i - 5) / 10]!.signal).catch(() => ({ status: 0, text: 'left' })) : send(i),
    );
    // Mid-burst the first replica leaves the snapshot and comes back while its requests still run.
    await waitFor(() => sims[0]!.sim.stats().running > 0, 'requests running on the first replica');
    for (const c of leavers) c.abort();
    node.store.replace(snapshot(2, replicas.slice(1)));
    node.store.replace(snapshot(3, replicas));
    const results = await Promise.all(all);

    const kept = results.filter((_, i) => i % 10 !== 5);
    expect(kept.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.text.slice(0, 200)}`)).toEqual([]);
    for (const [i, s] of sims.entries()) {
      const stats = s.sim.stats();
      expect(stats.peakInFlight, `replica ${i}`).toBeLessThanOrEqual(CAP);
      expect(stats.peakRunning, `replica ${i}`).toBeLessThanOrEqual(CAP);
    }
    // Retries and an ejection happened, and the slots all came back: the next requests are served at once.
    const metrics = await (await fetch(node.metricsUrl)).text();
    expect(metrics).toMatch(/dataplane_retries_total\{reason="status_503"\} [1-9]/);
    expect(metrics).toMatch(/dataplane_replica_ejections_total\{upstream="r-2"\} [1-9]/);
    await waitFor(() => sims.every((s) => s.sim.stats().running === 0), 'the runtimes idle');
    const after = await Promise.all(Array.from({ length: CAP * 2 }, (_, i) => send(1000 + i)));
    expect(after.map((r) => r.status)).toEqual(Array(CAP * 2).fill(200));
    for (const s of sims) expect(s.sim.stats().peakInFlight).toBeLessThanOrEqual(CAP);
  }, 60_000);
});
