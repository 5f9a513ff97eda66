import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, chatBody, deadUrl, makeSnapshot, memorySink, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

let sim: StartedSim;
let dp: StartedApp;
const sink = memorySink();

beforeAll(async () => {
  sim = await startSim({ itlMs: 10 });
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), sink);
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

const simEntry = (requestId: string) => sim.sim.stats().requests.find((e) => e.id.startsWith(`chatcmpl-${requestId}.`));

function open(requestId: string, body: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
  return fetch(`${dp.url}/endpoints/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}`, 'x-request-id': requestId },
    body: JSON.stringify(body),
    signal,
  });
}

describe('client disconnect', () => {
  it('mid-stream: the runtime sees the abort within 100 ms, and usage counts the tokens produced', async () => {
    const ac = new AbortController();
    const res = await open('dc-stream', chatBody({ model: NAME, stream: true, max_tokens: 1000 }), ac.signal);
    const reader = res.body!.getReader();
    let received = 0;
    while (received < 5) {
      const { value } = await reader.read();
      received += (
        Buffer.from(value!)
          .toString('utf8')
          .match(/"content":"/g) ?? []
      ).length;
    }
    const abortAt = Date.now();
    ac.abort();
    await waitFor(() => simEntry('dc-stream')?.aborted === true);
    const entry = simEntry('dc-stream')!;
    // Promptly (a generous bound on a loaded machine): the 1000 tokens would take 10 s to finish.
    expect(entry.abortedAt! - abortAt).toBeLessThan(1000);
    expect(entry.completionTokens).toBeLessThan(1000);

    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('dc-stream.')));
    const rec = sink.records.find((r) => r.requestId.startsWith('dc-stream.'))!;
    expect(rec.status).toBe(499);
    expect(rec.estimated).toBe(true);
    // Every token the client could have seen is billed (the runtime may have produced one more in flight).
    expect(rec.completionTokens).toBeGreaterThanOrEqual(received);
    expect(rec.completionTokens).toBeLessThanOrEqual(entry.completionTokens);
    expect(rec.promptTokens).toBeGreaterThan(0);
  });

  it('reliability 7: a JSON client that leaves mid-generation is billed what the runtime produced', async () => {
    const body = chatBody({ model: NAME, max_tokens: 40 });
    const ac = new AbortController();
    const pending = open('dc-json', body, ac.signal).catch(() => null);
    // The runtime is decoding (10 ms per token) when the client leaves.
    await waitFor(() => simEntry('dc-json') !== undefined);
    await new Promise((r) => setTimeout(r, 100));
    ac.abort();
    await pending;
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('dc-json.')));
    const rec = sink.records.find((r) => r.requestId.startsWith('dc-json.'))!;
    const entry = simEntry('dc-json')!;
    // The runtime ran to the end (not aborted) and its own usage is billed, under the client-closed status.
    expect(entry.aborted).toBe(false);
    expect(rec).toMatchObject({ status: 499, estimated: false });
    expect(rec.completionTokens).toBeGreaterThan(0);
    expect(rec.completionTokens).toBe(entry.completionTokens);
    expect(rec.promptTokens).toBeGreaterThan(0);
  });

  it('leaves no request in flight', async () => {
    await waitFor(() => sim.sim.stats().running === 0);
    const metrics = await (await fetch(dp.metricsUrl)).text();
    expect(metrics).toContain('dataplane_in_flight_requests 0');
  });
});

describe('a node stopping', () => {
  it('a call that reaches the runtime stage after the stop (it waited for admission) is a 503 billed nothing, not sent on', async () => {
    const node = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), sink);
    try {
      expect(node.app.stopInFlight()).toBe(0);
      const res = await fetch(`${node.url}/endpoints/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}`, 'x-request-id': 'after-stop' },
        body: JSON.stringify(chatBody({ model: NAME, max_tokens: 5 })),
      });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('service_unavailable');
      expect(simEntry('after-stop')).toBeUndefined();
      await waitFor(() => sink.records.some((r) => r.requestId.startsWith('after-stop.')));
      expect(sink.records.find((r) => r.requestId.startsWith('after-stop.'))).toMatchObject({ status: 503, promptTokens: 0, completionTokens: 0 });
    } finally {
      await node.app.close();
    }
  });
});
