import { afterEach, describe, expect, it } from 'vitest';
import { postChat, startSim, userMessages, waitFor, type StartedSim } from './sim-helpers.ts';

let s: StartedSim | undefined;
afterEach(() => s?.sim.close());

const gauge = (text: string, name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, 'm').exec(text)?.[1]);

describe('batch slots and the waiting queue', () => {
  it('runs batchSlots at once, queues up to maxQueue, and 503s beyond', async () => {
    s = await startSim({ batchSlots: 2, maxQueue: 2, itlMs: 60 });
    const sim = s.sim;
    const url = s.url;
    // Each request takes about 10 x 60 ms, so all seven arrive while the first two still run.
    const pending = Array.from({ length: 7 }, (_, i) => postChat(url, { messages: userMessages(`req ${i}`), max_tokens: 10 }));
    await waitFor(() => sim.stats().totals.requests === 7);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const results = await Promise.all(pending);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 503, 503, 503]);
    const rejected = results.find((r) => r.status === 503)!;
    expect(((await rejected.json()) as { error: { type: string; code: string } }).error).toMatchObject({ type: 'api_error', code: 'service_unavailable' });
    expect(gauge(metrics, 'vllm:num_requests_running')).toBe(2);
    expect(gauge(metrics, 'vllm:num_requests_waiting')).toBe(2);
    expect(sim.stats().totals).toMatchObject({ completed: 4, rejected: 3 });
    expect(sim.stats()).toMatchObject({ running: 0, waiting: 0 });
    for (const r of results) if (r.status === 200) await r.json();
  });

  it('drops a queued request when its client goes away', async () => {
    s = await startSim({ batchSlots: 1, itlMs: 30 });
    const sim = s.sim;
    const running = postChat(s.url, { messages: userMessages('first'), max_tokens: 10 });
    const controller = new AbortController();
    const queued = postChat(s.url, { messages: userMessages('second'), max_tokens: 10 }, { signal: controller.signal });
    await waitFor(() => sim.stats().waiting === 1);
    controller.abort();
    await expect(queued).rejects.toThrow();
    await waitFor(() => sim.stats().waiting === 0);
    expect((await running).status).toBe(200);
    const aborted = sim.stats().requests.find((r) => r.aborted)!;
    expect(aborted.completionTokens).toBe(0);
    expect(sim.stats().totals.promptTokens).toBe(sim.stats().requests[0]!.promptTokens);
  });
});

describe('cold start', () => {
  it('is 503 on /health while cold, holds requests until warm, then is 200', async () => {
    const startedAt = Date.now();
    s = await startSim({ coldStartMs: 400 });
    const health = await fetch(`${s.url}/health`);
    expect(health.status).toBe(503);
    expect(((await health.json()) as { error: { code: string } }).error.code).toBe('service_unavailable');
    expect(s.sim.stats().warm).toBe(false);
    const res = await postChat(s.url, { messages: userMessages('early'), max_tokens: 3 });
    expect(res.status).toBe(200);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(390);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    expect(s.sim.stats().warm).toBe(true);
  });
});
