import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUsageReporter } from '../src/index.ts';
import type { UsageReporter } from '../src/index.ts';
import { NAME, chatBody, deadUrl, fakeRecord, makeSnapshot, post, startDataplane, startSim, startUsageServer, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim, UsageServer } from './helpers.ts';

let sim: StartedSim;
let sink: UsageServer;
let reporter: UsageReporter;
let dp: StartedApp;

beforeAll(async () => {
  sim = await startSim();
  sink = await startUsageServer();
  reporter = createUsageReporter({ url: sink.url, nodeToken: 'node-secret', flushMs: 50 });
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), reporter);
});
afterAll(async () => {
  await dp.app.close();
  await reporter.close();
  await sink.close();
  await sim.sim.close();
});

// A caller's x-request-id is suffixed in its usage record (`<id>.<uuid>`): reused ids must not dedupe at the ingest.
const recordFor = (id: string) => sink.records.find((r) => r.requestId.startsWith(`${id}.`));

describe('usage records', () => {
  it('reports the runtime token counts of a JSON request', async () => {
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), undefined, { 'x-request-id': 'usage-json-1' });
    const body = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    await waitFor(() => recordFor('usage-json-1') !== undefined);
    const r = recordFor('usage-json-1')!;
    expect(r).toMatchObject({
      tenantId: 't-a',
      keyId: 'k-a',
      endpointId: 'e-llama',
      deploymentId: null,
      mode: 'shared',
      model: NAME,
      status: 200,
      estimated: false,
      promptTokens: body.usage.prompt_tokens,
      completionTokens: body.usage.completion_tokens,
    });
    expect(r.latencyMs).toBeGreaterThanOrEqual(0);
    expect(sink.authHeaders[0]).toBe('Bearer node-secret');
  });

  it('reports the usage chunk of a stream even when the client did not ask for it', async () => {
    const res = await post(`${dp.url}/funccall/acme/endpoints/${NAME}/v1/chat/completions`, chatBody({ stream: true, max_tokens: 6 }), undefined, {
      'x-request-id': 'usage-sse-1',
    });
    const text = await res.text();
    expect(text).not.toContain('"usage":{');
    await waitFor(() => recordFor('usage-sse-1') !== undefined);
    const r = recordFor('usage-sse-1')!;
    const entry = sim.sim.stats().requests.find((e) => e.id.startsWith('chatcmpl-usage-sse-1.'))!;
    expect(r).toMatchObject({
      mode: 'dedicated',
      deploymentId: 'd-a',
      status: 200,
      estimated: false,
      completionTokens: entry.completionTokens,
      promptTokens: entry.promptTokens,
    });
    expect(r.ttftMs).not.toBeNull();
  });

  it('records failed requests too', async () => {
    sim.sim.setFaults({ errorStatus: 500 });
    try {
      const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), undefined, { 'x-request-id': 'usage-err-1' });
      expect(res.status).toBe(502);
      await res.text();
    } finally {
      sim.sim.setFaults({});
    }
    await waitFor(() => recordFor('usage-err-1') !== undefined);
    expect(recordFor('usage-err-1')).toMatchObject({ status: 502, promptTokens: 0, completionTokens: 0 });
  });
});

describe('usage reporter', () => {
  it('retries a failed POST and delivers every record once', async () => {
    const s = await startUsageServer();
    const rep = createUsageReporter({ url: s.url, nodeToken: 't', flushMs: 30 });
    try {
      s.failNext(2);
      for (let i = 0; i < 3; i++) rep.record(fakeRecord(`retry-${i}`));
      await waitFor(() => s.records.length === 3);
      expect(s.posts.filter((p) => p.status === 500).length).toBe(2);
      await waitFor(() => rep.pending() === 0); // the answer reaches the reporter just after the server stored them
    } finally {
      await rep.close();
      await s.close();
    }
  });

  it('sends batches of at most maxBatch and flushes pending records on close', async () => {
    const s = await startUsageServer();
    const rep = createUsageReporter({ url: s.url, nodeToken: 't', flushMs: 60_000, maxBatch: 10 });
    try {
      for (let i = 0; i < 25; i++) rep.record(fakeRecord(`close-${i}`));
      await rep.close();
      expect(s.records).toHaveLength(25);
      expect(Math.max(...s.posts.map((p) => p.count))).toBeLessThanOrEqual(10);
    } finally {
      await s.close();
    }
  });

  it('a busy node posts whole batches: what arrives during a POST waits for a full batch or the timer', async () => {
    const s = await startUsageServer();
    const rep = createUsageReporter({ url: s.url, nodeToken: 't', flushMs: 60_000, maxBatch: 10 });
    try {
      // 35 at once: the 10th starts a POST; 25 more arrive while it is in flight.
      for (let i = 0; i < 35; i++) rep.record(fakeRecord(`batch-${i}`));
      await waitFor(() => rep.pending() === 5);
      // 5 more make a whole batch again; the 5 left over before them are not sent alone.
      for (let i = 35; i < 40; i++) rep.record(fakeRecord(`batch-${i}`));
      await waitFor(() => s.records.length === 40);
      expect(s.posts.map((p) => p.count)).toEqual([10, 10, 10, 10]);
      // Less than a batch goes on flush() (and on the timer, and at close).
      for (let i = 40; i < 43; i++) rep.record(fakeRecord(`batch-${i}`));
      await rep.flush();
      expect(s.posts.map((p) => p.count)).toEqual([10, 10, 10, 10, 3]);
      expect(new Set(s.records.map((r) => r.requestId)).size).toBe(43);
    } finally {
      await rep.close();
      await s.close();
    }
  });

  it('keeps records while the control plane is down', async () => {
    const rep = createUsageReporter({ url: await deadUrl(), nodeToken: 't', flushMs: 20 });
    rep.record(fakeRecord('kept-1'));
    await rep.flush();
    expect(rep.pending()).toBe(1);
    await rep.close();
    expect(rep.pending()).toBe(1);
  });
});
