import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadUrl, errorOf, post, startSim } from './helpers.ts';
import type { StartedSim } from './helpers.ts';
import { CHAT, DURATION, RATE_HEADERS, keyLimits, smallBody, startLimitedNode } from './limits-fixtures.ts';
import type { LimitedNode } from './limits-fixtures.ts';

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
    const results = await Promise.all(Array.from({ length: 200 }, async () => {
      const res = await post(node.url + CHAT, smallBody());
      await res.text();
      return res.status;
    }));
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
    const results = await Promise.all(Array.from({ length: 40 }, async (_, i) => {
      const res = await post((i % 2 === 0 ? a : b).url + CHAT, smallBody());
      await res.text();
      return { node: i % 2, status: res.status };
    }));
    expect(results.filter((r) => r.status === 200).length).toBe(10);
    expect(results.filter((r) => r.status === 429).length).toBe(30);
    for (const n of [a, b]) {
      const res = await post(n.url + CHAT, smallBody());
      expect(res.status).toBe(429);
      expect(res.headers.get('x-ratelimit-remaining-requests')).toBe('0');
      await res.text();
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
