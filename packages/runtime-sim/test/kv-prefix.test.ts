import { afterEach, describe, expect, it } from 'vitest';
import { openSse, postChat, startSim, waitFor, type StartedSim } from './sim-helpers.ts';

let s: StartedSim | undefined;
afterEach(() => s?.sim.close());

const sample = (text: string, name: string): number => Number(new RegExp(`^${name}\\{[^}]*\\} ([0-9.e+-]+)$`, 'm').exec(text)?.[1]);
const scrape = async (url: string): Promise<string> => (await fetch(`${url}/metrics`)).text();
const longSystem = (tag: string) => `${tag} `.repeat(3) + 'policy clause number words words '.repeat(120);

describe('prefix caching over HTTP', () => {
  it('does not prefill a cached prefix again: the second prompt with the same system prompt is faster and counted as hits', async () => {
    // About 1,000 prompt tokens at 1 ms each: a cold prefill takes about a second.
    s = await startSim({ prefillMsPerToken: 1, itlMs: 1 });
    const { url, sim } = s;
    const system = { role: 'system', content: longSystem('acme') };
    const ttftOf = async (user: string): Promise<number> => {
      const t0 = performance.now();
      const res = await postChat(url, { messages: [system, { role: 'user', content: user }], max_tokens: 2, stream: true });
      const sse = openSse(res);
      await sse.read(1);
      const ttft = performance.now() - t0;
      await sse.read();
      return ttft;
    };
    const cold = await ttftOf('first question');
    const warm = await ttftOf('another question entirely');
    const [a, b] = sim.stats().requests;
    expect(a!.cachedTokens).toBe(0);
    // Every full block of the shared system message matched.
    expect(b!.cachedTokens).toBeGreaterThan(b!.promptTokens * 0.9);
    // Timers never fire early: the cold prefill took at least its ~1,000 tokens x 1 ms.
    expect(cold).toBeGreaterThanOrEqual(a!.promptTokens - 5);
    expect(warm).toBeGreaterThan(0);
    const m = await scrape(url);
    expect(sample(m, 'vllm:prefix_cache_queries_total')).toBe(a!.promptTokens + b!.promptTokens);
    expect(sample(m, 'vllm:prefix_cache_hits_total')).toBe(b!.cachedTokens);
    expect(sim.stats().totals).toMatchObject({ prefixCacheHits: b!.cachedTokens });
    expect(m).toContain('# TYPE vllm:inter_token_latency_seconds histogram');
    expect(sample(m, 'vllm:inter_token_latency_seconds_count')).toBe(2); // one gap per 2-token answer
  });

  it('a different system prompt finds nothing cached', async () => {
    s = await startSim({ itlMs: 1 });
    const { url, sim } = s;
    for (const tag of ['acme', 'globex']) {
      const res = await postChat(url, {
        messages: [
          { role: 'system', content: longSystem(tag) },
          { role: 'user', content: 'hi' },
        ],
        max_tokens: 1,
      });
      await res.json();
    }
    expect(sim.stats().requests.map((r) => r.cachedTokens)).toEqual([0, 0]);
  });
});

describe('KV cache capacity', () => {
  it('makes requests wait while the cache is full, with num_requests_waiting up, and runs them once blocks free', async () => {
    // 256 tokens of KV: one request of about 150 prompt + 60 completion tokens fills it.
    s = await startSim({ kvCacheTokens: 256, kvBlockSize: 16, batchSlots: 8, itlMs: 10 });
    const { url, sim } = s;
    const body = (i: number) => ({ messages: [{ role: 'user', content: `request ${i} `.repeat(40) }], max_tokens: 60, stream: true });
    const streams = await Promise.all([0, 1, 2].map((i) => postChat(url, body(i))));
    await waitFor(() => sim.stats().running === 1 && sim.stats().waiting === 2);
    const busy = await scrape(url);
    expect(sample(busy, 'vllm:num_requests_waiting')).toBe(2);
    expect(sample(busy, 'vllm:kv_cache_usage_perc')).toBeGreaterThan(0.5);
    const done = await Promise.all(streams.map((r) => openSse(r).read()));
    for (const d of done) expect(d.data.at(-1)).toBe('[DONE]');
    expect(sim.stats()).toMatchObject({ running: 0, waiting: 0, peakRunning: 1, kvCacheUsage: 0 });
  });

  it('refuses a request that could never fit the cache', async () => {
    s = await startSim({ kvCacheTokens: 64 });
    const res = await postChat(s.url, { messages: [{ role: 'user', content: 'word '.repeat(80) }], max_tokens: 8 });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');
  });
});
