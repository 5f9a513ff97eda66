import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadUrl, errorOf, post, startSim } from './helpers.ts';
import type { StartedSim } from './helpers.ts';
import { CHAT, DURATION, RATE_HEADERS, SECOND_A, keyLimits, smallBody, startLimitedNode, tenantLimits } from './limits-fixtures.ts';
import type { LimitedNode } from './limits-fixtures.ts';
import { createMemoryRateLimiter, type RateDecision } from '../src/limits/rate-limiter.ts';
import { createRedisRateLimiter } from '../src/limits/redis-rate-limiter.ts';

// CI starts Redis on 127.0.0.1:6379 (.ci/run); elsewhere these tests run when it answers.
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const RUN = `test:limits:${process.pid}:${Date.now()}`;

async function redisUp(): Promise<boolean> {
  const probe = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}
const available = await redisUp();
if (!available) throw new Error(`Redis is not answering at ${REDIS_URL}: the limit tests need it (.ci/run starts it)`);

let sim: StartedSim;
let admin: Redis;
let seq = 0;
const nodes: LimitedNode[] = [];
/** A node on Redis under a prefix of this run (`tag` shares it between nodes). */
async function redisNode(mutate: Parameters<typeof startLimitedNode>[1], tag = `p${++seq}`, extra = {}): Promise<LimitedNode> {
  const n = await startLimitedNode(sim.url, mutate, { redisUrl: REDIS_URL, redisPrefix: `${RUN}:${tag}`, ...extra });
  nodes.push(n);
  return n;
}

describe('rate limits shared through Redis', () => {
  beforeAll(async () => {
    sim = await startSim({ ttftMs: 10, itlMs: 2 });
    admin = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.app.close()));
    await sim.sim.close();
    let cursor = '0';
    do {
      const [next, found] = await admin.scan(cursor, 'MATCH', `${RUN}:*`, 'COUNT', 500);
      if (found.length > 0) await admin.del(...found);
      cursor = next;
    } while (cursor !== '0');
    admin.disconnect();
  });

  it('answers 429 with retry-after and every x-ratelimit-* header once the RPM is spent', async () => {
    const node = await redisNode(keyLimits(2, 10_000));
    for (let i = 0; i < 2; i++) {
      const ok = await post(node.url + CHAT, smallBody());
      expect(ok.status).toBe(200);
      expect(ok.headers.get('x-ratelimit-remaining-requests')).toBe(String(1 - i));
      await ok.text();
    }
    const res = await post(node.url + CHAT, smallBody());
    expect(res.status).toBe(429);
    expect((await errorOf(res)).code).toBe('rate_limit_exceeded');
    for (const h of RATE_HEADERS) expect(res.headers.get(h), h).not.toBeNull();
    expect(res.headers.get('x-ratelimit-reset-requests')).toMatch(DURATION);
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await admin.exists(`${RUN}:p${seq}:{k-a}:r`)).toBe(1);
  });

  it('200 concurrent requests against 100 tokens per minute never admit more than 100 tokens', async () => {
    const node = await redisNode(keyLimits(null, 100));
    const before = sim.sim.stats().totals.requests;
    const results = await Promise.all(
      Array.from({ length: 200 }, async () => {
        const res = await post(node.url + CHAT, smallBody());
        await res.text();
        return res.status;
      }),
    );
    const ok = results.filter((s) => s === 200).length;
    expect(ok).toBeGreaterThan(0);
    expect(results.filter((s) => s === 429).length).toBe(200 - ok);
    const used = node.usage.records.filter((r) => r.status === 200).reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);
    expect(used).toBeLessThanOrEqual(100);
    expect(sim.sim.stats().totals.requests - before).toBe(ok);
  });

  it('two nodes on one Redis hold one key limit together', async () => {
    const a = await redisNode(keyLimits(10, null), 'shared');
    const b = await redisNode(keyLimits(10, null), 'shared');
    const results = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const res = await post((i % 2 === 0 ? a : b).url + CHAT, smallBody());
        await res.text();
        return { node: i % 2, status: res.status };
      }),
    );
    expect(results.filter((r) => r.status === 200).length).toBe(10);
    expect(results.filter((r) => r.status === 429).length).toBe(30);
    for (const n of [a, b]) {
      const res = await post(n.url + CHAT, smallBody());
      expect(res.status).toBe(429);
      expect(res.headers.get('x-ratelimit-remaining-requests')).toBe('0');
      await res.text();
    }
  });

  it("two nodes and two keys of one tenant hold the tenant's limit together, and settlement corrects both windows", async () => {
    const mutate = tenantLimits({ tpm: 300 }, { tpm: 1000 });
    const a = await redisNode(mutate, 'tenant');
    const b = await redisNode(mutate, 'tenant');
    const first = await post(a.url + CHAT, smallBody({ max_tokens: 100, stop: [' '] }));
    const used = ((await first.json()) as { usage: { total_tokens: number } }).usage.total_tokens;
    // The tighter of the two windows is told: the tenant's 300, not the key's 1000.
    expect(first.headers.get('x-ratelimit-limit-tokens')).toBe('300');
    expect(first.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - 112));
    // On the same node, so the first's settlement (fire-and-forget, on that node's connection) reached Redis first.
    const second = await post(a.url + CHAT, smallBody({ max_tokens: 100 }), SECOND_A);
    await second.text();
    expect(second.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - used - 112));
    expect(await admin.exists(`${RUN}:tenant:{tenant:t-a}:t`)).toBe(1);
    // What the two used leaves less than 212 tokens in the tenant's window, for either key on either node.
    const full = await post(b.url + CHAT, smallBody({ max_tokens: 200 }), SECOND_A);
    expect(full.status).toBe(429);
    expect((await errorOf(full)).message).toMatch(/tenant \(all its keys together\) on tokens per minute \(limit 300\)/);
  });

  it("a key's refusal never holds its tenant's window, even for a moment: the tenant's last request goes to another key", async () => {
    const node = await redisNode(tenantLimits({ rpm: 2 }, { rpm: 1 }), 'atomic');
    const first = await post(node.url + CHAT, smallBody());
    expect(first.status).toBe(200);
    await first.text();
    // k-a is spent; the tenant has one request left. k-a's refusals, arriving with it, must not take that one.
    const refusals = Array.from({ length: 30 }, async () => {
      const res = await post(node.url + CHAT, smallBody());
      return { status: res.status, message: res.status === 429 ? (await errorOf(res)).message : await res.text() };
    });
    const other = post(node.url + CHAT, smallBody(), SECOND_A).then(async (res) => ({ status: res.status, body: await res.text() }));
    const [spent, second] = await Promise.all([Promise.all(refusals), other]);
    expect(second.status).toBe(200);
    for (const r of spent) {
      expect(r.status).toBe(429);
      expect(r.message).toMatch(/^Rate limit reached for this API key on requests per minute/);
    }
  });

  it('the Redis limiter charges all windows of a request or none, and settles them in one call', async () => {
    const rl = createRedisRateLimiter({ url: REDIS_URL, prefix: `${RUN}:direct`, fallback: createMemoryRateLimiter(), onWarn: () => {} });
    try {
      await rl.ready(2000);
      const tenant = { id: 'tenant:t', rpm: 3, tpm: 1000 };
      const key = (id: string) => ({ id, rpm: 1, tpm: null });
      const both = async (id: string) => (await rl.reserve([tenant, key(id)], 100)) as readonly RateDecision[];
      const a = await both('a');
      expect(a.map((d) => [d.admitted, d.store])).toEqual([
        [true, 'redis'],
        [true, 'redis'],
      ]);
      const refused = await both('a');
      expect(refused.map((d) => [d.admitted, d.retryAfterMs > 0])).toEqual([
        [false, false],
        [false, true],
      ]);
      expect([refused[0]!.requestsUsed, refused[0]!.tokensUsed]).toEqual([1, 100]);
      // Settled together: the tenant gets 60 tokens back, and the key's window (no TPM) is untouched.
      rl.settle(
        [
          { id: 'tenant:t', d: a[0]! },
          { id: 'a', d: a[1]! },
        ],
        false,
        -60,
      );
      await expect.poll(async () => Number(await admin.hget(`${RUN}:direct:{tenant:t}:t`, 't'))).toBe(40);
      expect(await admin.exists(`${RUN}:direct:{a}:t`)).toBe(0);
      const b = await both('b');
      expect(b.map((d) => d.admitted)).toEqual([true, true]);
      expect(b[0]!.tokensUsed).toBe(140);
      // Given back as never served: the request and its tokens, in both windows.
      rl.settle(
        [
          { id: 'tenant:t', d: b[0]! },
          { id: 'b', d: b[1]! },
        ],
        true,
        -100,
      );
      await expect.poll(async () => Number(await admin.hget(`${RUN}:direct:{tenant:t}:r`, 't'))).toBe(1);
      expect(Number(await admin.hget(`${RUN}:direct:{b}:r`, 't'))).toBe(0);
      expect(Number(await admin.hget(`${RUN}:direct:{tenant:t}:t`, 't'))).toBe(40);
    } finally {
      await rl.close();
    }
  });

  it('settlement gives back the unused part of a reservation', async () => {
    const node = await redisNode(keyLimits(null, 300));
    const first = await post(node.url + CHAT, smallBody({ max_tokens: 100, stop: [' '] }));
    const body = (await first.json()) as { usage: { total_tokens: number } };
    expect(first.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - 112));
    const second = await post(node.url + CHAT, smallBody({ max_tokens: 100 }));
    await second.text();
    expect(second.headers.get('x-ratelimit-remaining-tokens')).toBe(String(300 - body.usage.total_tokens - 112));
  });

  it('fails open to the in-memory limiter when Redis is unreachable', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const dead = (await deadUrl()).replace('http://', 'redis://');
    const node = await startLimitedNode(sim.url, keyLimits(2, null), { redisUrl: dead, redisPrefix: `${RUN}:dead` }, { loggerInstance: logger });
    nodes.push(node);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post(node.url + CHAT, smallBody());
      statuses.push(res.status);
      await res.text();
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(lines.join('')).toMatch(/redis rate-limit store unreachable; limiting per node in memory/);
  });
});

describe('replica concurrency shared through Redis', () => {
  let slow: StartedSim;
  let admin: Redis;
  const slotNodes: LimitedNode[] = [];
  const RUN_SLOTS = `${RUN}:slots`;
  beforeAll(async () => {
    slow = await startSim({ ttftMs: 50, itlMs: 100 });
    admin = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    await Promise.all(slotNodes.map((n) => n.app.close()));
    await slow.sim.close();
    const found = await admin.keys(`${RUN_SLOTS}:*`);
    if (found.length > 0) await admin.del(...found);
    admin.disconnect();
  });
  /** Base 1 x Concurrency 2 on the one replica of e-llama: two requests at once, fleet-wide. */
  const twoX = (s: Parameters<Parameters<typeof startLimitedNode>[1]>[0]): void => {
    s.endpoints.find((e) => e.id === 'e-llama')!.concurrency = 2;
  };
  const slotNode = async (tag: string, limits: Record<string, unknown> = {}): Promise<LimitedNode> => {
    const n = await startLimitedNode(slow.url, twoX, {
      redisUrl: REDIS_URL,
      redisPrefix: `${RUN_SLOTS}:${tag}`,
      replicaBaseConcurrency: 1,
      queueMax: 8,
      queueTimeoutMs: 10_000,
      ...limits,
    });
    await n.app.inject({ method: 'GET', url: '/readyz' }); // the Redis connection is up before traffic
    slotNodes.push(n);
    return n;
  };
  const leaseKey = (tag: string): string => `${RUN_SLOTS}:${tag}:slots:{e-llama}`;
  const held = (n: LimitedNode, maxTokens = 4) => post(n.url + CHAT, smallBody({ max_tokens: maxTokens }));

  it('two nodes hold one replica capacity together: never more than two at the runtime', async () => {
    const a = await slotNode('pair');
    const b = await slotNode('pair');
    let peak = 0;
    const probe = setInterval(() => {
      peak = Math.max(peak, slow.sim.stats().running);
    }, 5);
    try {
      const statuses = await Promise.all(
        Array.from({ length: 6 }, async (_, i) => {
          const r = await held(i % 2 === 0 ? a : b);
          await r.text();
          return r.status;
        }),
      );
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    } finally {
      clearInterval(probe);
    }
    expect(peak).toBe(2); // per node, each would have let two in: four
    expect(await admin.zcard(leaseKey('pair'))).toBe(0); // every lease given back
  });

  it('a node whose slots are taken elsewhere queues to its deadline (503), or answers 429 with no queue', async () => {
    const a = await slotNode('busy');
    const b = await slotNode('busy', { queueTimeoutMs: 300 });
    const c = await slotNode('busy', { queueMax: 0 });
    const running = [held(a, 10), held(a, 10)];
    await new Promise((r) => setTimeout(r, 100));
    expect(await admin.zcard(leaseKey('busy'))).toBe(2);
    const [late, full] = await Promise.all([held(b), held(c)]);
    expect(late.status).toBe(503);
    expect((await errorOf(late)).message).toMatch(/waited 0\.3 s in the queue/);
    expect(full.status).toBe(429);
    expect(await errorOf(full)).toMatchObject({ code: 'concurrency_limit_exceeded' });
    for (const r of await Promise.all(running)) {
      expect(r.status).toBe(200);
      await r.text();
    }
    // Refused requests hold nothing: the next one on b goes straight through.
    const next = await held(b);
    expect(next.status).toBe(200);
    await next.text();
  });

  it('slots of a node that died lapse; a running request keeps its lease alive', async () => {
    const n = await slotNode('lapse', { sharedSlotLeaseMs: 400 });
    // A dead node's two leases, lapsing in 300 ms (Redis clock).
    const [sec, usec] = await admin.time();
    const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    await admin.zadd(leaseKey('lapse'), now + 300, 'dead-1', now + 300, 'dead-2');
    const long = held(n, 10); // admitted once they lapse, then ~1 s at the runtime: past its 400 ms lease
    await new Promise((r) => setTimeout(r, 1000));
    const [sec2, usec2] = await admin.time();
    const later = Number(sec2) * 1000 + Math.floor(Number(usec2) / 1000);
    // Admitted ~700 ms ago with a 400 ms lease: alive only because its node renewed it.
    expect(slow.sim.stats().running).toBe(1);
    expect(await admin.zcount(leaseKey('lapse'), later, '+inf')).toBe(1);
    const res = await long;
    expect(res.status).toBe(200);
    await res.text();
    // Admitted only once the dead node's leases had lapsed (Redis and this process read the same machine clock);
    // measured from the lapse instant itself, not from when this test got to start its timer.
    const entry = slow.sim.stats().requests.at(-1)!;
    expect(entry.startedAt).toBeGreaterThanOrEqual(now + 300 - 5);
    expect(await admin.zcard(leaseKey('lapse'))).toBe(0);
  });
});
