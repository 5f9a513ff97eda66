import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatDuration } from '../src/limits/ratelimit-headers.ts';
import { createConcurrencyGate, QueueRejection } from '../src/limits/concurrency-gate.ts';
import { createMemoryRateLimiter, type RateDecision } from '../src/limits/rate-limiter.ts';
import { errorOf, post, SECRET_A, SECRET_B, startSim } from './helpers.ts';
import type { StartedSim } from './helpers.ts';
import { CHAT, DURATION, RATE_HEADERS, SECOND_A, keyLimits, smallBody, startLimitedNode, tenantLimits } from './limits-fixtures.ts';
import type { LimitedNode } from './limits-fixtures.ts';

let sim: StartedSim;
let node: LimitedNode | null = null;

beforeAll(async () => {
  sim = await startSim();
});
afterEach(async () => {
  await node?.app.close();
  node = null;
});
afterAll(async () => {
  await sim.sim.close();
});

const simRequests = (s: StartedSim = sim): number => s.sim.stats().totals.requests;

describe('rate limits (in memory)', () => {
  it('answers 429 rate_limit_exceeded with retry-after and every x-ratelimit-* header once the RPM is spent', async () => {
    node = await startLimitedNode(sim.url, keyLimits(3, 10_000), {});
    for (let i = 0; i < 3; i++) {
      const ok = await post(node.url + CHAT, smallBody());
      expect(ok.status).toBe(200);
      await ok.text();
      expect(ok.headers.get('x-ratelimit-limit-requests')).toBe('3');
      expect(ok.headers.get('x-ratelimit-remaining-requests')).toBe(String(2 - i));
      expect(ok.headers.get('x-ratelimit-limit-tokens')).toBe('10000');
      expect(ok.headers.get('x-ratelimit-reset-requests')).toMatch(DURATION);
    }
    const res = await post(node.url + CHAT, smallBody());
    expect(res.status).toBe(429);
    const err = await errorOf(res);
    expect(err).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit_error' });
    expect(err.message).toMatch(/requests per minute/);
    for (const h of RATE_HEADERS) expect(res.headers.get(h), h).not.toBeNull();
    expect(res.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(res.headers.get('x-ratelimit-reset-requests')).toMatch(DURATION);
    expect(res.headers.get('x-ratelimit-reset-tokens')).toMatch(DURATION);
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(simRequests()).toBeGreaterThanOrEqual(3);
  });

  it('uses the tenant limit when the key sets none, the key limit when it does, and the env default last', async () => {
    node = await startLimitedNode(
      sim.url,
      (s) => {
        s.tenants.find((t) => t.id === 't-a')!.rpmLimit = 7;
        s.keys.find((k) => k.id === 'k-b')!.rpmLimit = 2; // tenant t-b sets none
      },
      { defaultRpm: 5 },
    );
    const a = await post(node.url + CHAT, smallBody());
    expect(a.headers.get('x-ratelimit-limit-requests')).toBe('7');
    await a.text();
    await node.app.close();

    node = await startLimitedNode(
      sim.url,
      (s) => {
        s.tenants.find((t) => t.id === 't-a')!.rpmLimit = 7;
        s.keys.find((k) => k.id === 'k-a')!.rpmLimit = 2;
      },
      { defaultRpm: 5 },
    );
    const b = await post(node.url + CHAT, smallBody());
    expect(b.headers.get('x-ratelimit-limit-requests')).toBe('2');
    await b.text();
    await node.app.close();

    node = await startLimitedNode(sim.url, () => {}, { defaultRpm: 5 });
    const c = await post(node.url + CHAT, smallBody());
    expect(c.headers.get('x-ratelimit-limit-requests')).toBe('5');
    expect(c.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    await c.text();
  });

  it("holds a tenant without limits of its own to the node's default over all its keys: more keys, or a key's own higher limit, get no more", async () => {
    // Key k-a's own limit is far above the default (members may set one); SECOND_A sets none.
    node = await startLimitedNode(sim.url, tenantLimits({}, { rpm: 1_000_000_000 }), { defaultRpm: 3 });
    const statuses: number[] = [];
    for (const key of [SECRET_A, SECRET_A, SECOND_A, SECRET_A, SECOND_A]) {
      const res = await post(node.url + CHAT, smallBody(), key);
      statuses.push(res.status);
      if (res.status === 429) expect(res.headers.get('x-ratelimit-limit-requests')).toBe('3');
      await res.text();
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
  });

  it("counts a tenant's limit over all its keys together: more keys, or a key's own higher limit, get no more", async () => {
    // A member's own key limit (1000) cannot lift the tenant's.
    node = await startLimitedNode(sim.url, tenantLimits({ rpm: 3 }, { rpm: 1000 }), {});
    const statuses: number[] = [];
    for (const key of [SECRET_A, SECOND_A, SECRET_A, SECOND_A]) {
      const res = await post(node.url + CHAT, smallBody(), key);
      statuses.push(res.status);
      if (res.status === 200) {
        expect(res.headers.get('x-ratelimit-limit-requests')).toBe('3');
        await res.text();
      } else {
        const err = await errorOf(res);
        expect(err).toMatchObject({ code: 'rate_limit_exceeded' });
        expect(err.message).toMatch(/tenant \(all its keys together\) on requests per minute \(limit 3\)/);
        expect(res.headers.get('x-ratelimit-remaining-requests')).toBe('0');
      }
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    // Another tenant's key is not charged for them.
    const other = await post(node.url + CHAT, smallBody(), SECRET_B);
    expect(other.status).toBe(200);
    await other.text();
  });

  it("a key refused by its own limit gives its tenant's charge back", async () => {
    node = await startLimitedNode(sim.url, tenantLimits({ rpm: 3 }, { rpm: 1 }), {});
    const first = await post(node.url + CHAT, smallBody());
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit-requests')).toBe('1');
    await first.text();
    for (let i = 0; i < 3; i++) {
      const refused = await post(node.url + CHAT, smallBody());
      expect(refused.status).toBe(429);
      expect((await errorOf(refused)).message).toMatch(/for this API key on requests per minute \(limit 1\)/);
    }
    // The three refusals took nothing of the tenant's 3: the second key still gets two.
    for (let i = 0; i < 2; i++) {
      const ok = await post(node.url + CHAT, smallBody(), SECOND_A);
      expect(ok.status).toBe(200);
      await ok.text();
    }
    expect((await post(node.url + CHAT, smallBody(), SECOND_A)).status).toBe(429);
  });

  it('sends no x-ratelimit-* headers when no limit applies', async () => {
    node = await startLimitedNode(sim.url, () => {}, {});
    const res = await post(node.url + CHAT, smallBody());
    expect(res.status).toBe(200);
    await res.text();
    for (const h of RATE_HEADERS) expect(res.headers.get(h)).toBeNull();
  });

  it('200 concurrent requests against 100 tokens per minute never admit more than 100 tokens', async () => {
    const own = await startSim({ ttftMs: 20, itlMs: 5 });
    try {
      node = await startLimitedNode(own.url, keyLimits(null, 100), {});
      const results = await Promise.all(
        Array.from({ length: 200 }, async () => {
          const res = await post(node!.url + CHAT, smallBody());
          await res.text();
          return res.status;
        }),
      );
      const ok = results.filter((s) => s === 200).length;
      expect(ok).toBeGreaterThan(0);
      expect(results.filter((s) => s === 429).length).toBe(200 - ok);
      const used = node.usage.records.filter((r) => r.status === 200).reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);
      const simUsed = own.sim.stats().requests.reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);
      expect(used).toBeLessThanOrEqual(100);
      expect(simUsed).toBeLessThanOrEqual(100);
      expect(own.sim.stats().totals.requests).toBe(ok);
    } finally {
      await own.sim.close();
    }
  });

  it('settlement gives back the unused part of a reservation', async () => {
    node = await startLimitedNode(sim.url, keyLimits(null, 300), {});
    // max_tokens 100, but the stop string ends the answer after its first word.
    const first = await post(node.url + CHAT, smallBody({ max_tokens: 100, stop: [' '] }), SECRET_A, { 'x-request-id': 'settle-1' });
    expect(first.status).toBe(200);
    const body = (await first.json()) as { usage: { total_tokens: number } };
    expect(body.usage.total_tokens).toBeLessThan(20);
    // 12 estimated prompt tokens + 100 reserved for the completion.
    expect(first.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - 112));
    const second = await post(node.url + CHAT, smallBody({ max_tokens: 100 }));
    await second.text();
    expect(second.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - body.usage.total_tokens - 112));
  });

  it('streams carry the x-ratelimit-* headers and settle from the usage chunk', async () => {
    node = await startLimitedNode(sim.url, keyLimits(10, 300), {});
    const res = await post(node.url + CHAT, smallBody({ stream: true, max_tokens: 100, stop: [' '] }), SECRET_A, { 'x-request-id': 'settle-sse' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-remaining-requests')).toBe('9');
    expect(res.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - 112));
    await res.text();
    const rec = node.usage.records.find((r) => r.requestId.startsWith('settle-sse.'))!;
    const next = await post(node.url + CHAT, smallBody());
    await next.text();
    expect(next.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - (rec.promptTokens + rec.completionTokens) - 22));
  });

  it('refuses a request larger than the whole TPM limit, and reserves at most the limit without max_tokens', async () => {
    node = await startLimitedNode(sim.url, keyLimits(null, 50), {});
    const big = await post(node.url + CHAT, smallBody({ max_tokens: 200 }));
    expect(big.status).toBe(429);
    expect((await errorOf(big)).message).toMatch(/too large/i);
    const open = await post(node.url + CHAT, smallBody({ max_tokens: undefined }));
    expect(open.status).toBe(200);
    await open.text();
  });

  it('a 429 on tokens says when the request counted a default completion because max_tokens was not set', async () => {
    const slow = await startSim({ ttftMs: 50, itlMs: 50 });
    try {
      node = await startLimitedNode(slow.url, keyLimits(null, 6000), { defaultCompletionTokens: 4096 });
      // The first counts as its messages plus 4,096 until it is answered; the second cannot fit beside it.
      const first = await post(node.url + CHAT, smallBody({ max_tokens: undefined, stream: true }));
      expect(first.status).toBe(200);
      const second = await post(node.url + CHAT, smallBody({ max_tokens: undefined }));
      expect(second.status).toBe(429);
      expect((await errorOf(second)).message).toMatch(
        /tokens per minute \(limit 6000\).*plus 4096 for the completion, since max_tokens is not set; set max_tokens/,
      );
      // With max_tokens the count is what it asks for, and it fits.
      const bounded = await post(node.url + CHAT, smallBody({ max_tokens: 10 }));
      expect(bounded.status).toBe(200);
      await bounded.text();
      await first.body?.cancel();
    } finally {
      await node?.app.close();
      node = null;
      await slow.sim.close();
    }
  });
});

describe('replica concurrency', () => {
  let slow: StartedSim;
  beforeAll(async () => {
    slow = await startSim({ ttftMs: 50, itlMs: 100 });
  });
  afterAll(async () => {
    await slow.sim.close();
  });
  const twoX = (s: Parameters<Parameters<typeof startLimitedNode>[1]>[0]): void => {
    s.endpoints.find((e) => e.id === 'e-llama')!.concurrency = 2;
  };
  const held = () => post(node!.url + CHAT, smallBody({ max_tokens: 10 }));

  it('base 1 x 2 lets two in, queues the next, answers 429 when the queue is full and 503 at the deadline', async () => {
    node = await startLimitedNode(slow.url, twoX, { replicaBaseConcurrency: 1, queueMax: 1, queueTimeoutMs: 300 });
    const before = simRequests(slow);
    const inFlight = [held(), held()];
    await new Promise((r) => setTimeout(r, 100));
    expect(slow.sim.stats().running).toBe(2);
    const queued = held();
    await new Promise((r) => setTimeout(r, 50));
    const full = await post(node.url + CHAT, smallBody());
    expect(full.status).toBe(429);
    expect(await errorOf(full)).toMatchObject({ code: 'concurrency_limit_exceeded', type: 'rate_limit_error' });
    expect(full.headers.get('retry-after')).toBe('1');
    const late = await queued;
    expect(late.status).toBe(503);
    expect((await errorOf(late)).message).toMatch(/waited 0\.3 s in the queue/);
    for (const r of await Promise.all(inFlight)) {
      expect(r.status).toBe(200);
      await r.text();
    }
    expect(simRequests(slow) - before).toBe(2);
  });

  it('a queued request runs when a slot frees, never more than two at once', async () => {
    node = await startLimitedNode(slow.url, twoX, { replicaBaseConcurrency: 1, queueMax: 8, queueTimeoutMs: 10_000 });
    let peak = 0;
    const probe = setInterval(() => {
      peak = Math.max(peak, slow.sim.stats().running);
    }, 10);
    try {
      const all = await Promise.all(
        Array.from({ length: 5 }, async () => {
          const r = await held();
          await r.text();
          return r.status;
        }),
      );
      expect(all).toEqual([200, 200, 200, 200, 200]);
    } finally {
      clearInterval(probe);
    }
    expect(peak).toBe(2);
  });

  it('no multiplier means the base', async () => {
    node = await startLimitedNode(
      slow.url,
      (s) => {
        s.endpoints.find((e) => e.id === 'e-llama')!.concurrency = null;
      },
      { replicaBaseConcurrency: 1, queueMax: 0 },
    );
    const first = held();
    await new Promise((r) => setTimeout(r, 50));
    const second = await post(node.url + CHAT, smallBody());
    expect(second.status).toBe(429);
    await second.text();
    expect((await first).status).toBe(200);
  });
});

describe('context length and body size', () => {
  it('400 context_length_exceeded before any upstream call when the request is clearly over', async () => {
    node = await startLimitedNode(
      sim.url,
      (s) => {
        s.endpoints.find((e) => e.id === 'e-llama')!.contextLength = 100;
      },
      {},
    );
    const before = simRequests();
    const long = await post(node.url + CHAT, smallBody({ messages: [{ role: 'user', content: 'word '.repeat(200) }], max_tokens: undefined }));
    expect(long.status).toBe(400);
    expect(await errorOf(long)).toMatchObject({ code: 'context_length_exceeded', param: 'messages', type: 'invalid_request_error' });
    const greedy = await post(node.url + CHAT, smallBody({ max_tokens: 100 }));
    expect(greedy.status).toBe(400);
    expect((await errorOf(greedy)).message).toMatch(/maximum context length is 100 tokens/);
    expect(simRequests()).toBe(before);
    const fits = await post(node.url + CHAT, smallBody({ max_tokens: 50 }));
    expect(fits.status).toBe(200);
    await fits.text();
    // Both names sent: max_completion_tokens is the cap the runtime applies (vLLM, SGLang), so it is the one counted;
    // a small max_tokens beside it does not let a greedy cap through.
    const both = await post(node.url + CHAT, smallBody({ max_tokens: 1, max_completion_tokens: 1_000_000_000 }));
    expect(both.status).toBe(400);
    expect(await errorOf(both)).toMatchObject({ code: 'context_length_exceeded' });
    expect(simRequests()).toBe(before + 1);
  });

  it("passes the runtime's own context-length 400 through as that error", async () => {
    const tiny = await startSim({ maxContextLength: 40 });
    try {
      node = await startLimitedNode(
        tiny.url,
        (s) => {
          s.endpoints.find((e) => e.id === 'e-llama')!.contextLength = null;
        },
        {},
      );
      const res = await post(node.url + CHAT, smallBody({ max_tokens: 35 }));
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
    } finally {
      await tiny.sim.close();
    }
  });

  it('413 request_too_large for a body over the limit', async () => {
    const { startDataplane, makeSnapshot, memorySink, deadUrl } = await import('./helpers.ts');
    const started = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), memorySink(), { bodyLimit: 2048 });
    try {
      const res = await post(started.url + CHAT, smallBody({ messages: [{ role: 'user', content: 'x'.repeat(5000) }] }));
      expect(res.status).toBe(413);
      expect((await errorOf(res)).code).toBe('request_too_large');
    } finally {
      await started.app.close();
    }
  });
});

describe('limit building blocks', () => {
  it("formats durations like OpenAI's headers", () => {
    expect(formatDuration(20)).toBe('20ms');
    expect(formatDuration(6000)).toBe('6s');
    expect(formatDuration(8640)).toBe('8.64s');
    expect(formatDuration(60_000)).toBe('1m0s');
    expect(formatDuration(360_000)).toBe('6m0s');
  });

  it('the memory window expires charges after a minute and refunds into the charged slot', () => {
    let now = 1_000_000;
    const rl = createMemoryRateLimiter(() => now);
    const reserve = (tokens: number) => (rl.reserve([{ id: 'k', rpm: 2, tpm: 100 }], tokens) as readonly RateDecision[])[0]!;
    const d = reserve(80);
    expect(d.admitted).toBe(true);
    expect(reserve(30).admitted).toBe(false);
    rl.settle([{ id: 'k', d }], false, -60);
    expect(reserve(30)).toMatchObject({ admitted: true, requestsUsed: 2, tokensUsed: 50 });
    const refused = reserve(1);
    expect(refused.admitted).toBe(false);
    expect(refused.retryAfterMs).toBe(60_000);
    now += 60_000;
    expect(reserve(100).admitted).toBe(true);
    void rl.close();
  });

  it('the memory limiter charges all windows of a request or none', () => {
    const rl = createMemoryRateLimiter(() => 1_000_000);
    const tenant = { id: 'tenant:t', rpm: 3, tpm: null };
    const key = (id: string) => ({ id, rpm: 1, tpm: null });
    const both = (id: string) => rl.reserve([tenant, key(id)], 0) as readonly RateDecision[];
    expect(both('a').map((d) => d.admitted)).toEqual([true, true]);
    // Key a is full: refused, and the tenant's window is not charged for it (it told which window refused).
    const refused = both('a');
    expect(refused.map((d) => [d.admitted, d.retryAfterMs > 0])).toEqual([
      [false, false],
      [false, true],
    ]);
    expect(refused[0]!.requestsUsed).toBe(1);
    expect(both('b')[0]!.requestsUsed).toBe(2);
    expect(both('c')[0]!.requestsUsed).toBe(3);
    expect(both('d').map((d) => [d.admitted, d.retryAfterMs > 0])).toEqual([
      [false, true],
      [false, false],
    ]);
    // Key d's own window took nothing either.
    expect((rl.reserve([key('d')], 0) as readonly RateDecision[])[0]!.admitted).toBe(true);
    void rl.close();
  });

  it('the gate is FIFO and drops waiters that gave up', async () => {
    const gate = createConcurrencyGate({ queueMax: 2, queueTimeoutMs: 50 });
    expect(gate.acquire('g', 1, null)).toBeNull();
    const order: number[] = [];
    const a = gate.acquire('g', 1, null)!.then(() => order.push(1));
    const b = gate.acquire('g', 1, null)!.then(() => order.push(2));
    await expect(gate.acquire('g', 1, null)).rejects.toBeInstanceOf(QueueRejection);
    gate.release('g');
    await a;
    gate.release('g');
    await b;
    expect(order).toEqual([1, 2]);
    const timedOut = gate.acquire('g', 1, null)!;
    await expect(timedOut).rejects.toMatchObject({ outcome: 'timeout' });
    gate.release('g');
    expect(gate.stats('g')).toEqual({ active: 0, queued: 0 });
  });

  it('the gate follows its capacity of now: a replica that left takes its slots, one that came gives them at once', async () => {
    const gate = createConcurrencyGate({ queueMax: 8, queueTimeoutMs: 5000 });
    expect(gate.acquire('g', 2, null)).toBeNull();
    expect(gate.acquire('g', 2, null)).toBeNull();
    let woken = 0;
    const waiter = gate.acquire('g', 2, null)!.then(() => woken++);
    // Two replicas became one: a slot freed by a request taken under the old capacity is not handed on.
    gate.resize('g', 1);
    gate.release('g');
    await new Promise((r) => setTimeout(r, 10));
    expect(woken).toBe(0);
    expect(gate.stats('g')).toEqual({ active: 1, queued: 1 });
    // Three replicas now: the waiter gets a new slot without waiting for a release.
    gate.resize('g', 3);
    await waiter;
    expect(gate.stats('g')).toEqual({ active: 2, queued: 0 });
    gate.release('g');
    gate.release('g');
    expect(gate.stats('g')).toEqual({ active: 0, queued: 0 });
  });
});
