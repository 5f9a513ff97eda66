import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_A, SECRET_B, deadUrl, post, startSim, waitFor } from './helpers.ts';
import type { StartedSim } from './helpers.ts';
import { CHAT, smallBody, startLimitedNode } from './limits-fixtures.ts';
import type { LimitedNode } from './limits-fixtures.ts';

// Reliability 3 and 4: a private redis-server on its own port, frozen with SIGSTOP and resumed with SIGCONT.
let redis: ChildProcess;
let redisUrl: string;
let admin: Redis;
let sim: StartedSim;
const nodes: LimitedNode[] = [];
const PREFIX = `test:fault:${process.pid}`;
const RPM_B = 20;

beforeAll(async () => {
  const port = new URL(await deadUrl()).port;
  redis = spawn('redis-server', ['--port', port, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  redisUrl = `redis://127.0.0.1:${port}`;
  admin = new Redis(redisUrl, { maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  admin.on('error', () => {}); // refused until redis-server has started
  await waitFor(() => admin.status === 'ready');
  sim = await startSim({ ttftMs: 5, itlMs: 1 });
});
afterAll(async () => {
  if (redis.exitCode === null) {
    redis.kill('SIGCONT');
    redis.kill('SIGKILL');
  }
  admin.disconnect();
  await Promise.all(nodes.map((n) => n.app.close()));
  await sim.sim.close();
});

async function node(): Promise<LimitedNode> {
  const n = await startLimitedNode(
    sim.url,
    (s) => {
      s.keys.find((k) => k.id === 'k-b')!.rpmLimit = RPM_B;
    },
    { redisUrl, redisPrefix: PREFIX, replicaBaseConcurrency: 2, queueTimeoutMs: 3000 },
  );
  nodes.push(n);
  return n;
}

const gauge = async (n: LimitedNode, name: string): Promise<number> => {
  const m = await (await fetch(n.metricsUrl)).text();
  const line = m.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no gauge ${name}`);
  return Number(line.split(' ')[1]);
};
const breakerOpen = (n: LimitedNode): Promise<number> => gauge(n, 'dataplane_redis_breaker_open');
const failOpen = (n: LimitedNode): Promise<number> => gauge(n, 'dataplane_redis_fail_open');

/** One chat request; its status and wall time. */
async function timed(n: LimitedNode, key: string): Promise<{ status: number; ms: number }> {
  const t0 = performance.now();
  const res = await post(n.url + CHAT, smallBody({ max_tokens: 4 }), key);
  await res.text();
  return { status: res.status, ms: performance.now() - t0 };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe('a frozen Redis (SIGSTOP, then SIGCONT)', () => {
  it('fails open at once behind a breaker, leaves no lease behind, and enforces limits again once Redis answers', async () => {
    const n1 = await node();
    const n2 = await node();
    const healthy: number[] = [];
    for (let i = 0; i < 5; i++) {
      for (const key of [SECRET_A, SECRET_B]) {
        const r = await timed(n1, key);
        expect(r.status).toBe(200);
        healthy.push(r.ms);
      }
    }
    expect(await breakerOpen(n1)).toBe(0);

    redis.kill('SIGSTOP');
    // Five at once: each sends its slot take before the first timeout opens the breaker (takes that Redis will run later).
    const first = await Promise.all(Array.from({ length: 5 }, () => timed(n1, SECRET_A)));
    expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(await breakerOpen(n1)).toBe(1);
    const frozen: number[] = [];
    for (let i = 0; i < 10; i++) {
      for (const key of [SECRET_A, SECRET_B]) {
        const r = await timed(n1, key);
        expect(r.status).toBe(200);
        frozen.push(r.ms);
      }
    }
    expect(await breakerOpen(n1)).toBe(1);

    redis.kill('SIGCONT');
    await untilTrue(async () => (await breakerOpen(n1)) === 0);
    // Redis has now run the queued takes; the deferred releases remove them (well before the 30 s lease life).
    const slotKey = `${PREFIX}:slots:{e-llama}`;
    await untilTrue(async () => (await admin.zcard(slotKey)) === 0, 10_000);

    // The fleet-wide slots (capacity 2) are free: concurrent requests are served, none waits for the queue's deadline.
    const after = await Promise.all(Array.from({ length: 4 }, () => timed(n1, SECRET_A)));
    expect(after.map((r) => r.status)).toEqual([200, 200, 200, 200]);

    // Limits are enforced through Redis again: the other node, whose own memory never saw key B, refuses it in time.
    let refusedAt = -1;
    for (let i = 0; i < RPM_B + 1; i++) {
      const r = await timed(n2, SECRET_B);
      if (r.status === 429) {
        refusedAt = i;
        break;
      }
      expect(r.status).toBe(200);
    }
    expect(refusedAt).toBeGreaterThanOrEqual(0);
    expect(refusedAt).toBeLessThan(RPM_B);

    console.log(
      `[redis-fault] median latency: healthy ${median(healthy).toFixed(1)} ms; first requests after SIGSTOP ${first.map((r) => r.ms.toFixed(0)).join('/')} ms; ` +
        `breaker open ${median(frozen).toFixed(1)} ms (max ${Math.max(...frozen).toFixed(1)} ms); after SIGCONT ${median(after.map((r) => r.ms)).toFixed(1)} ms`,
    );
  }, 60_000);
});

describe('a killed Redis (SIGKILL, then a new redis-server on its port)', () => {
  it('reports failing open while the connection is down, though the breaker never opened, and not once it is back', async () => {
    const n = await node();
    await untilTrue(async () => (await failOpen(n)) === 0);
    redis.kill('SIGKILL');
    await waitFor(() => redis.exitCode !== null || redis.signalCode !== null);
    await untilTrue(async () => (await failOpen(n)) === 1);
    expect(await breakerOpen(n)).toBe(0);
    // Requests are still served, limited by this node's memory.
    expect((await timed(n, SECRET_A)).status).toBe(200);
    redis = spawn('redis-server', ['--port', new URL(redisUrl).port, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    await untilTrue(async () => (await failOpen(n)) === 0, 20_000);
    expect((await timed(n, SECRET_A)).status).toBe(200);
  }, 60_000);
});

async function untilTrue(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
