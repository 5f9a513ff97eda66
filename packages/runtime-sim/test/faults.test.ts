import { afterEach, describe, expect, it } from 'vitest';
import { openSse, postChat, readSse, startSim, userMessages, waitFor, type StartedSim } from './sim-helpers.ts';

let s: StartedSim | undefined;
afterEach(() => s?.sim.close());

const postFaults = (url: string, body: unknown) =>
  fetch(`${url}/sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('fault injection', () => {
  it('errorStatus answers every chat request with that status and an OpenAI body', async () => {
    s = await startSim({ faults: { errorStatus: 502 } });
    for (let i = 0; i < 3; i++) {
      const res = await postChat(s.url, { messages: userMessages('x') });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { type: string; message: string } }).error).toMatchObject({
        type: 'api_error',
        message: expect.stringMatching(/injected/),
      });
    }
    expect(s.sim.stats().totals.failed).toBe(3);
  });

  it('errorRate fails about that share of requests', async () => {
    s = await startSim({ faults: { errorRate: 0.5, errorStatus: 429 } });
    const statuses = await Promise.all(
      Array.from({ length: 200 }, async () => (await postChat(s!.url, { messages: userMessages('x'), max_tokens: 1 })).status),
    );
    const failed = statuses.filter((st) => st === 429).length;
    expect(statuses.every((st) => st === 200 || st === 429)).toBe(true);
    expect(failed).toBeGreaterThan(40);
    expect(failed).toBeLessThan(160);
  });

  it('hang never answers, and the client abort is recorded', async () => {
    s = await startSim({ faults: { hang: true } });
    await expect(postChat(s.url, { messages: userMessages('x') }, { signal: AbortSignal.timeout(300) })).rejects.toThrow();
    const sim = s.sim;
    await waitFor(() => sim.stats().totals.aborted === 1);
    expect(sim.stats().requests[0]).toMatchObject({ aborted: true, completionTokens: 0, status: 0 });
  });

  it('hangAfterTokens streams N tokens then stalls until the client leaves', async () => {
    s = await startSim({ faults: { hangAfterTokens: 2 } });
    const controller = new AbortController();
    const res = await postChat(s.url, { messages: userMessages('x'), stream: true, max_tokens: 10 }, { signal: controller.signal });
    const sse = openSse(res);
    expect((await sse.read(2)).data).toHaveLength(2);
    const more = sse.read(1);
    const outcome = await Promise.race([more.then(() => 'data'), new Promise((r) => setTimeout(() => r('stalled'), 300))]);
    expect(outcome).toBe('stalled');
    expect(s.sim.stats().running).toBe(1);
    controller.abort();
    const sim = s.sim;
    await waitFor(() => sim.stats().totals.aborted === 1);
    expect(sim.stats().requests[0]).toMatchObject({ aborted: true, completionTokens: 2 });
    expect(sim.stats().running).toBe(0);
  });

  it('cutAfterTokens streams N tokens then drops the connection without [DONE]', async () => {
    s = await startSim({ faults: { cutAfterTokens: 3 } });
    const res = await postChat(s.url, { messages: userMessages('x'), stream: true, max_tokens: 10 });
    expect(res.status).toBe(200);
    const { data, error } = await readSse(res);
    expect(data).toHaveLength(3);
    expect(data).not.toContain('[DONE]');
    expect(error).not.toBeNull();
    expect(s.sim.stats().requests[0]).toMatchObject({ finishReason: 'cut', completionTokens: 3, aborted: false });
    // A JSON request under the same fault gets no response at all.
    await expect(postChat(s.url, { messages: userMessages('x'), max_tokens: 10 })).rejects.toThrow();
  });

  it('slowTokenMs adds inter-token latency', async () => {
    s = await startSim({ faults: { slowTokenMs: 50 } });
    const started = Date.now();
    const { data } = await readSse(await postChat(s.url, { messages: userMessages('x'), stream: true, max_tokens: 5 }));
    expect(data.at(-1)).toBe('[DONE]');
    expect(Date.now() - started).toBeGreaterThanOrEqual(4 * 50 - 10);
  });

  it('switches faults at run time over POST /sim/faults and clears them with {}', async () => {
    s = await startSim();
    const body = { messages: userMessages('x'), max_tokens: 2 };
    expect((await postChat(s.url, body)).status).toBe(200);
    const set = await postFaults(s.url, { errorStatus: 500 });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ faults: { errorStatus: 500 } });
    expect((await postChat(s.url, body)).status).toBe(500);
    expect(await (await fetch(`${s.url}/sim/faults`)).json()).toEqual({ faults: { errorStatus: 500 } });
    expect((await postFaults(s.url, {})).status).toBe(200);
    expect((await postChat(s.url, body)).status).toBe(200);
    const bad = await postFaults(s.url, { errorRate: 3 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/errorRate/);
    expect((await postFaults(s.url, { explode: true })).status).toBe(400);
  });
});
