import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { openSse, postChat, startSim, userMessages, waitFor, type StartedSim } from './sim-helpers.ts';

let s: StartedSim | undefined;
let child: ChildProcess | undefined;
afterEach(async () => {
  await s?.sim.close();
  s = undefined;
  if (child && child.exitCode === null) child.kill('SIGKILL');
});

const sample = (text: string, name: string, labels = ''): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}`));
  if (line === undefined) throw new Error(`no ${name}{${labels} in metrics`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
};
const scrape = async (url: string): Promise<string> => (await fetch(`${url}/metrics`)).text();

describe('cold start follows the configured Cold Start TTFT, capped', () => {
  it('waits min(coldStartMs, coldStartCapMs), answers /health 503 until warm, and reports readiness', async () => {
    s = await startSim({ coldStartMs: 120_000, coldStartCapMs: 300 });
    expect(s.sim.warm).toBe(false);
    expect((await fetch(`${s.url}/health`)).status).toBe(503);
    const early = postChat(s.url, { messages: userMessages('before warm'), max_tokens: 2 });
    await s.sim.whenWarm();
    expect(s.sim.warm).toBe(true);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    expect((await early).status).toBe(200);
    const st = s.sim.stats();
    expect(st.coldStartMs).toBe(300);
    expect(st.warmAt! - st.listenedAt!).toBeGreaterThanOrEqual(290);
    expect(st.pid).toBe(process.pid);
    expect(st.processStartedAt).toBeLessThanOrEqual(st.listenedAt!);
  });

  it('the CLI takes --cold-start-ms and SIM_COLD_START_CAP_MS and prints a ready line once warm', async () => {
    const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
    child = spawn(process.execPath, [cli, '--port', '0', '--cold-start-ms', '90000'], {
      env: { ...process.env, SIM_COLD_START_CAP_MS: '200' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(() => out.includes('listening on'));
    const url = /listening on (http:\/\/[^ ]+)/.exec(out)![1]!;
    await waitFor(() => out.includes('ready on'));
    expect(out).toContain(`runtime-sim ready on ${url}\n`);
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });
});

describe('vLLM metrics from the real scheduler', () => {
  it('exports running, waiting, KV cache usage and a TTFT histogram, and remembers peak in-flight', async () => {
    s = await startSim({ batchSlots: 2, itlMs: 40, kvCacheTokens: 1000 });
    const { url, sim } = s;
    const streams = await Promise.all(Array.from({ length: 3 }, (_, i) => postChat(url, { messages: userMessages(`req ${i}`), max_tokens: 20, stream: true })));
    await waitFor(() => sim.stats().running === 2 && sim.stats().waiting === 1);
    const busy = await scrape(url);
    expect(sample(busy, 'vllm:num_requests_running')).toBe(2);
    expect(sample(busy, 'vllm:num_requests_waiting')).toBe(1);
    const kv = sample(busy, 'vllm:kv_cache_usage_perc');
    expect(kv).toBeGreaterThan(0);
    expect(kv).toBeLessThanOrEqual(1);
    for (const r of streams) await openSse(r).read();
    await waitFor(() => sim.stats().totals.completed === 3);
    const idle = await scrape(url);
    expect(sample(idle, 'vllm:num_requests_running')).toBe(0);
    expect(sample(idle, 'vllm:kv_cache_usage_perc')).toBe(0);
    expect(sample(idle, 'vllm:time_to_first_token_seconds_count')).toBe(3);
    expect(sample(idle, 'vllm:time_to_first_token_seconds_bucket', 'le="+Inf"')).toBe(3);
    expect(idle).toContain('# TYPE vllm:time_to_first_token_seconds histogram');
    expect(sim.stats()).toMatchObject({ peakRunning: 2, peakInFlight: 3, running: 0, waiting: 0 });
    const json = (await (await fetch(`${url}/sim/stats`)).json()) as { peakInFlight: number; kvCacheUsage: number };
    expect(json).toMatchObject({ peakInFlight: 3, kvCacheUsage: 0 });
  });
});
