import type { ConfigSnapshot, SnapshotRouting, SnapshotUpstream } from '@infer/shared';
import { afterEach, describe, expect, it } from 'vitest';
import type { RuntimeSimOptions } from '@infer/runtime-sim';
import { NAME, SERVED, deadUrl, makeSnapshot, memorySink, post, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';
import type { RoutingOptions } from '../src/routing/create-routing.ts';

// Issue 12: inference-aware routing over real sockets: two runtime-sim replicas (vLLM metrics, prefix caching)
// behind one node whose router scrapes their /metrics.
let sims: StartedSim[] = [];
let dp: StartedApp | null = null;
afterEach(async () => {
  await dp?.app.close();
  dp = null;
  for (const s of sims) await s.sim.close();
  sims = [];
});

const replica = (id: string, url: string): SnapshotUpstream => ({ id, url, kind: 'sim', servedModel: SERVED, apiKey: null });
const CHAT = '/endpoints/v1/chat/completions';

async function fleet(
  simOpts: RuntimeSimOptions,
  routing: RoutingOptions,
  entryRouting?: SnapshotRouting,
): Promise<{ a: StartedSim; b: StartedSim; dp: StartedApp }> {
  const a = await startSim(simOpts);
  const b = await startSim(simOpts);
  sims = [a, b];
  const snap: ConfigSnapshot = makeSnapshot({ sim: a.url, faulty: a.url, dead: await deadUrl() });
  const entry = snap.endpoints.find((e) => e.name === NAME)!;
  entry.upstreams = [replica('r-a', a.url), replica('r-b', b.url)];
  if (entryRouting) entry.routing = entryRouting;
  dp = await startDataplane(snap, memorySink(), { routing });
  return { a, b, dp };
}

const family = (tenant: string) =>
  `You are the support assistant of ${tenant}. `.repeat(2) + `Rule ${tenant}: answer with care and cite the policy. `.repeat(40);
const ask = (tenant: string, question: string, extra: Record<string, unknown> = {}) => ({
  model: NAME,
  max_tokens: 4,
  messages: [
    { role: 'system', content: family(tenant) },
    { role: 'user', content: question },
  ],
  ...extra,
});
const metricsText = async (d: StartedApp): Promise<string> => (await fetch(d.metricsUrl)).text();
const metricValue = (text: string, name: string, labels: string): number | null => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.split(',').every((p) => l.includes(p)));
  return line === undefined ? null : Number(line.slice(line.lastIndexOf(' ') + 1));
};
/** Waits until the node holds a scrape of each replica no older than `maxAgeS`. */
async function scraped(d: StartedApp, maxAgeS = 0.5): Promise<void> {
  let text = '';
  const fresh = (id: string): boolean => {
    const age = metricValue(text, 'dataplane_replica_metrics_age_seconds', `replica="${id}"`);
    return age !== null && age >= 0 && age <= maxAgeS;
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    text = await metricsText(d);
    if (fresh('r-a') && fresh('r-b')) return;
    if (Date.now() > deadline) throw new Error(`replicas not scraped:\n${text}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const chats = (s: StartedSim): number => s.sim.stats().totals.requests;

describe('the scorer', () => {
  it('sends a prompt to the replica that holds its prefix, where the runtime finds it cached', async () => {
    const f = await fleet({ itlMs: 1 }, { scrapeIntervalMs: 50 });
    await scraped(f.dp);
    const first = await post(`${f.dp.url}${CHAT}`, ask('acme', 'Where is my order?'));
    expect(first.status).toBe(200);
    await first.json();
    const holder = chats(f.a) === 1 ? f.a : f.b;
    const other = holder === f.a ? f.b : f.a;
    for (let i = 0; i < 6; i++) {
      await scraped(f.dp);
      const res = await post(`${f.dp.url}${CHAT}`, ask('acme', `Follow-up question number ${i}?`));
      expect(res.status).toBe(200);
      await res.json();
    }
    expect(chats(holder)).toBe(7);
    expect(chats(other)).toBe(0);
    // The runtime did not prefill the shared system prompt again.
    const later = holder.sim.stats().requests.slice(1);
    for (const r of later) expect(r.cachedTokens).toBeGreaterThan(r.promptTokens / 2);
    const m = await metricsText(f.dp);
    const holderId = holder === f.a ? 'r-a' : 'r-b';
    expect(metricValue(m, 'dataplane_routing_decisions_total', `replica="${holderId}",policy="scorer",reason="scored"`)).toBeGreaterThanOrEqual(6);
    expect(metricValue(m, 'dataplane_routing_prefix_match_ratio', `target="e-llama",replica="${holderId}"`)).toBeGreaterThan(0.5);
    expect(m).not.toContain('127.0.0.1'); // labels are ids, never addresses
  });
});

describe('stale or failing metrics', () => {
  it("fall back to least in flight when a replica's metrics are stale, and requests still succeed", async () => {
    const f = await fleet({ itlMs: 40 }, { scrapeIntervalMs: 50, scrapeTimeoutMs: 150, staleMs: 300 });
    await scraped(f.dp);
    f.a.sim.setFaults({ metricsHang: true });
    let text = '';
    await waitFor(() => {
      void metricsText(f.dp).then((t) => (text = t));
      return (metricValue(text, 'dataplane_replica_metrics_age_seconds', 'replica="r-a"') ?? 0) > 0.4;
    });
    // A long stream of the acme prompt occupies one replica...
    const long = await post(`${f.dp.url}${CHAT}`, ask('acme', 'Long answer please', { max_tokens: 60, stream: true }));
    expect(long.status).toBe(200);
    const reader = long.body!.getReader();
    await reader.read();
    const busy = chats(f.a) === 1 ? f.a : f.b;
    const idle = busy === f.a ? f.b : f.a;
    // ...so the same prompt goes to the other one: least in flight, not prefix affinity (which would pick the busy one).
    const next = await post(`${f.dp.url}${CHAT}`, ask('acme', 'Short one'));
    expect(next.status).toBe(200);
    await next.json();
    expect(chats(idle)).toBe(1);
    expect(chats(busy)).toBe(1);
    await reader.cancel();
    const m = await metricsText(f.dp);
    expect(metricValue(m, 'dataplane_routing_decisions_total', 'policy="least_in_flight",reason="stale_metrics"')).toBeGreaterThanOrEqual(1);
  });

  it('a scrape that fails or hangs never touches the requests: every one is answered', async () => {
    const f = await fleet({ itlMs: 1 }, { scrapeIntervalMs: 30, scrapeTimeoutMs: 100, staleMs: 200 });
    f.a.sim.setFaults({ metricsErrorStatus: 500 });
    f.b.sim.setFaults({ metricsHang: true });
    let text = '';
    await waitFor(() => {
      void metricsText(f.dp).then((t) => (text = t));
      return (
        (metricValue(text, 'dataplane_replica_scrape_failures', 'replica="r-a"') ?? 0) >= 3 &&
        (metricValue(text, 'dataplane_replica_scrape_failures', 'replica="r-b"') ?? 0) >= 2
      );
    });
    const statuses = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const res = await post(`${f.dp.url}${CHAT}`, ask(i % 2 === 0 ? 'acme' : 'globex', `question ${i}`, { stream: i % 3 === 0 }));
        await res.text();
        return res.status;
      }),
    );
    expect(statuses).toEqual(new Array(20).fill(200));
    expect(chats(f.a) + chats(f.b)).toBe(20);
  });
});

describe('saturation', () => {
  it('holds, then sheds with 429 and retry-after when every replica is saturated; serves again once one has room', async () => {
    // One batch slot per replica, saturated at one waiting request.
    const f = await fleet({ itlMs: 50, batchSlots: 1 }, { scrapeIntervalMs: 30, holdMs: 150 }, { queueThreshold: 1 });
    await scraped(f.dp);
    // Not awaited: a queued stream's first byte comes only when it gets the slot.
    const streams = Array.from({ length: 4 }, (_, i) => post(`${f.dp.url}${CHAT}`, ask(`t${i}`, 'long', { max_tokens: 30, stream: true })));
    await waitFor(() => f.a.sim.stats().waiting === 1 && f.b.sim.stats().waiting === 1);
    let text = '';
    await waitFor(() => {
      void metricsText(f.dp).then((t) => (text = t));
      return (
        metricValue(text, 'dataplane_replica_queue_depth', 'replica="r-a"') === 1 && metricValue(text, 'dataplane_replica_queue_depth', 'replica="r-b"') === 1
      );
    });
    const shed = await post(`${f.dp.url}${CHAT}`, ask('acme', 'one more'));
    expect(shed.status).toBe(429);
    expect(shed.headers.get('retry-after')).toBe('1');
    const err = ((await shed.json()) as { error: { code: string; type: string; message: string } }).error;
    expect(err).toMatchObject({ code: 'concurrency_limit_exceeded', type: 'rate_limit_error' });
    expect(err.message).toMatch(/saturated/);
    expect(chats(f.a) + chats(f.b)).toBe(4); // nothing more was piled onto the runtimes
    const m = await metricsText(f.dp);
    expect(metricValue(m, 'dataplane_routing_held_total', 'target="e-llama"')).toBe(1);
    expect(metricValue(m, 'dataplane_routing_shed_total', 'target="e-llama"')).toBe(1);
    for (const s of streams) await (await s).text();
    await scraped(f.dp, 0.2);
    const after = await post(`${f.dp.url}${CHAT}`, ask('acme', 'now?'));
    expect(after.status).toBe(200);
    await after.json();
  });
});

describe('replica churn', () => {
  it('drops the decision series of a replica that left the snapshot (scale-to-zero churn must not grow them)', async () => {
    const f = await fleet({ itlMs: 1 }, { policy: 'round_robin' });
    const serve = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const res = await post(`${f.dp.url}${CHAT}`, ask('acme', `question ${i}`));
        expect(res.status).toBe(200);
        await res.json();
      }
    };
    await serve(4);
    const before = await metricsText(f.dp);
    expect(metricValue(before, 'dataplane_routing_decisions_total', 'replica="r-b"')).toBe(2);

    // r-b goes away and r-c takes its place (a new replica id, as every scale-up mints).
    const next = structuredClone(f.dp.store.snapshot()!);
    next.version++;
    next.endpoints.find((e) => e.name === NAME)!.upstreams = [replica('r-a', f.a.url), replica('r-c', f.b.url)];
    f.dp.store.replace(next);
    await serve(2);
    const after = await metricsText(f.dp);
    expect(after).not.toContain('replica="r-b"');
    expect(metricValue(after, 'dataplane_routing_decisions_total', 'replica="r-a"')).toBeGreaterThanOrEqual(2);
    expect(metricValue(after, 'dataplane_routing_decisions_total', 'replica="r-c"')).toBeGreaterThanOrEqual(1);
  });
});
