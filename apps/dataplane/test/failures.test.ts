import type { ConfigSnapshot, SnapshotUpstream } from '@infer/shared';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SERVED, chatBody, deadUrl, errorOf, makeSnapshot, memorySink, post, startDataplane, startSim, waitFor, dataLines } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

// Two simulated replicas: `a` gets the faults, `b` stays healthy.
let a: StartedSim;
let b: StartedSim;
let dead: string;
const opened: StartedApp[] = [];

beforeAll(async () => {
  a = await startSim({ itlMs: 5 });
  b = await startSim({ itlMs: 5 });
  dead = await deadUrl();
});
afterEach(async () => {
  a.sim.setFaults({});
  b.sim.setFaults({});
  await Promise.all(opened.splice(0).map((d) => d.app.close()));
});
afterAll(async () => {
  await a.sim.close();
  await b.sim.close();
});

const replica = (id: string, url: string): SnapshotUpstream => ({ id, url, kind: 'sim', servedModel: SERVED, apiKey: null });

/** The shared endpoint NAME served by the given replicas. */
function snapshotWith(urls: string[]): ConfigSnapshot {
  const snap = makeSnapshot({ sim: a.url, faulty: a.url, dead });
  const e = snap.endpoints.find((x) => x.name === NAME)!;
  e.upstreams = urls.map((u, i) => replica(`r-${i}`, u));
  return snap;
}

async function start(urls: string[], extra: Parameters<typeof startDataplane>[2] = {}) {
  const sink = memorySink();
  const dp = await startDataplane(snapshotWith(urls), sink, extra);
  opened.push(dp);
  return { dp, sink, chat: `${dp.url}/endpoints/v1/chat/completions` };
}

const requestsTo = (s: StartedSim) => s.sim.stats().totals.requests;

describe('runtime down', () => {
  it('retries a refused connection on the other replica', async () => {
    const { chat, sink } = await start([dead, b.url]);
    for (let i = 0; i < 4; i++) {
      const res = await post(chat, chatBody({ model: NAME }), undefined, { 'x-request-id': `down-${i}` });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { model: string }).model).toBe(NAME);
    }
    expect(sink.records.filter((r) => r.requestId.startsWith('down-')).every((r) => r.status === 200 && !r.estimated)).toBe(true);
  });

  it('answers 503 no_healthy_upstream with a clear message when no replica can be reached', async () => {
    const other = await deadUrl();
    const { chat, sink } = await start([dead, other]);
    const res = await post(chat, chatBody({ model: NAME }), undefined, { 'x-request-id': 'none-up' });
    expect(res.status).toBe(503);
    const err = await errorOf(res);
    expect(err.code).toBe('no_healthy_upstream');
    expect(err.message).toMatch(/No replica/);
    expect(sink.records.find((r) => r.requestId.startsWith('none-up.'))).toMatchObject({ status: 503, promptTokens: 0, completionTokens: 0 });
  });
});

describe('runtime 503', () => {
  it('is retried on another replica before the first byte, and the client sees a success', async () => {
    a.sim.setFaults({ errorStatus: 503 });
    const { chat, sink, dp } = await start([a.url, b.url]);
    for (let i = 0; i < 4; i++) {
      const res = await post(chat, chatBody({ model: NAME, stream: i % 2 === 1 }), undefined, { 'x-request-id': `r503-${i}` });
      expect(res.status).toBe(200);
      await res.text();
    }
    expect(sink.records.filter((r) => r.requestId.startsWith('r503-')).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const metrics = await (await fetch(dp.metricsUrl)).text();
    expect(metrics).toMatch(/dataplane_retries_total\{reason="status_503"\} [1-9]/);
  });

  it('with a single replica answers 503 (not retried on the same replica)', async () => {
    a.sim.setFaults({ errorStatus: 503 });
    const { chat, dp } = await start([a.url]);
    const before = requestsTo(a);
    const res = await post(chat, chatBody({ model: NAME }));
    expect(res.status).toBe(503);
    expect((await errorOf(res)).code).toBe('no_healthy_upstream');
    expect(requestsTo(a) - before).toBe(1);
    // One attempt, one runtime error, and no retry counted: there was no other replica to retry on.
    const metrics = await (await fetch(dp.metricsUrl)).text();
    expect(metrics).toMatch(/dataplane_runtime_errors_total\{reason="status_503"\} 1\n/);
    expect(metrics).not.toMatch(/dataplane_retries_total\{reason="status_503"\}/);
  });
});

describe('timeouts', () => {
  it('a hang before the first token is a 504 within the configured timeout', async () => {
    a.sim.setFaults({ hang: true });
    const { chat, sink } = await start([a.url], { timeouts: { firstByteMs: 200, responseMs: 200 } });
    for (const stream of [false, true]) {
      const t0 = Date.now();
      const res = await post(chat, chatBody({ model: NAME, stream }), undefined, { 'x-request-id': `hang-${stream}` });
      const took = Date.now() - t0;
      expect(res.status).toBe(504);
      expect((await errorOf(res)).code).toBe('upstream_timeout');
      expect(took).toBeGreaterThanOrEqual(190);
      expect(took).toBeLessThan(1500);
    }
    expect(sink.records.filter((r) => r.requestId.startsWith('hang-')).map((r) => r.status)).toEqual([504, 504]);
    // The hung runtime request was given up (aborted), not left open.
    await waitFor(() =>
      a.sim
        .stats()
        .requests.filter((r) => r.id.startsWith('chatcmpl-hang-'))
        .every((r) => r.aborted),
    );
  });

  it('a non-streamed answer may take longer than the first-byte timeout: its first byte is the whole answer', async () => {
    // A runtime sends a JSON answer only once it has generated all of it: capping that at the first-byte timeout
    // (120 s by default) failed every long answer with a 504 after the runtime had done the work.
    a.sim.setFaults({ slowTokenMs: 60 });
    const { chat, sink } = await start([a.url], { timeouts: { firstByteMs: 150, responseMs: 10_000 } });
    const res = await post(chat, chatBody({ model: NAME, max_tokens: 8 }), undefined, { 'x-request-id': 'long-json' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(8);
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('long-json')));
    expect(sink.records.find((r) => r.requestId.startsWith('long-json'))).toMatchObject({ status: 200, completionTokens: 8 });
    // Past the response timeout it is a 504, as before.
    const { chat: strict } = await start([a.url], { timeouts: { firstByteMs: 150, responseMs: 200 } });
    const late = await post(strict, chatBody({ model: NAME, max_tokens: 8 }));
    expect(late.status).toBe(504);
    expect((await errorOf(late)).code).toBe('upstream_timeout');
  });

  it('a slow stream ends with an idle-timeout error event and [DONE], never a silent cut', async () => {
    a.sim.setFaults({ slowTokenMs: 400 });
    const { chat, sink } = await start([a.url], { timeouts: { idleMs: 150 } });
    const res = await post(chat, chatBody({ model: NAME, stream: true, max_tokens: 20 }), undefined, { 'x-request-id': 'slow-1' });
    expect(res.status).toBe(200);
    const data = dataLines(await res.text());
    expect(data.at(-1)).toBe('[DONE]');
    const err = JSON.parse(data.at(-2)!) as { error: { code: string; type: string } };
    expect(err.error.code).toBe('upstream_timeout');
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('slow-1.')));
    const rec = sink.records.find((r) => r.requestId.startsWith('slow-1.'))!;
    expect(rec.status).toBe(504);
    const contentChunks = data.filter((d) => d.includes('"content":"')).length;
    expect(rec.completionTokens).toBe(contentChunks);
    expect(rec.estimated).toBe(true);
  });

  it('the idle timeout counts from the last chunk: a stream that keeps sending outlives it many times over', async () => {
    // Tokens 50 ms apart for about 0.6 s against a 150 ms idle timeout (armed once, re-armed from the last chunk).
    a.sim.setFaults({ slowTokenMs: 50 });
    const { chat, sink } = await start([a.url], { timeouts: { idleMs: 150 } });
    const res = await post(chat, chatBody({ model: NAME, stream: true, max_tokens: 12 }), undefined, { 'x-request-id': 'steady-1' });
    expect(res.status).toBe(200);
    const data = dataLines(await res.text());
    expect(data.at(-1)).toBe('[DONE]');
    expect(data.some((d) => d.includes('"error"'))).toBe(false);
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('steady-1.')));
    const rec = sink.records.find((r) => r.requestId.startsWith('steady-1.'))!;
    expect(rec.status).toBe(200);
    expect(rec.completionTokens).toBe(12);
  });
});

describe('cut mid-stream', () => {
  it('ends with an error event then [DONE]; the usage record counts the tokens streamed', async () => {
    a.sim.setFaults({ cutAfterTokens: 4 });
    const { chat, sink } = await start([a.url]);
    const res = await post(chat, chatBody({ model: NAME, stream: true, max_tokens: 20 }), undefined, { 'x-request-id': 'cut-9' });
    expect(res.status).toBe(200);
    const data = dataLines(await res.text());
    expect(data.at(-1)).toBe('[DONE]');
    expect((JSON.parse(data.at(-2)!) as { error: { code: string } }).error.code).toBe('upstream_error');
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('cut-9.')));
    expect(sink.records.find((r) => r.requestId.startsWith('cut-9.'))).toMatchObject({ status: 502, completionTokens: 4, estimated: true });
  });
});

describe('ejection', () => {
  it('ejects a replica after consecutive failures and brings it back after the health probe', async () => {
    a.sim.setFaults({ errorStatus: 502 });
    const { chat, dp } = await start([a.url, b.url], { ejection: { failures: 2, cooldownMs: 1000 } });
    const aBefore = requestsTo(a);
    // Retries hide the failures from the client; `a` takes requests until its second failure.
    for (let i = 0; i < 6; i++) expect((await post(chat, chatBody({ model: NAME }))).status).toBe(200);
    const aAfterEject = requestsTo(a);
    expect(aAfterEject - aBefore).toBe(2);
    for (let i = 0; i < 6; i++) expect((await post(chat, chatBody({ model: NAME }))).status).toBe(200);
    expect(requestsTo(a)).toBe(aAfterEject); // out of rotation
    const metrics = await (await fetch(dp.metricsUrl)).text();
    expect(metrics).toContain('dataplane_replica_ejections_total{upstream="r-0"} 1');
    expect(metrics).not.toContain('127.0.0.1'); // no runtime address in any label

    // Healthy again: the probe (GET /health) after the cool-down puts it back.
    a.sim.setFaults({});
    await new Promise((r) => setTimeout(r, 1300));
    for (let i = 0; i < 6; i++) expect((await post(chat, chatBody({ model: NAME }))).status).toBe(200);
    expect(requestsTo(a)).toBeGreaterThan(aAfterEject);
  });

  it("drops a departed replica's ejection series (scale-to-zero churns replica ids)", async () => {
    a.sim.setFaults({ errorStatus: 502 });
    const { chat, dp } = await start([a.url, b.url], { ejection: { failures: 1, cooldownMs: 60_000 } });
    for (let i = 0; i < 4; i++) expect((await post(chat, chatBody({ model: NAME }))).status).toBe(200);
    a.sim.setFaults({});
    expect(await (await fetch(dp.metricsUrl)).text()).toContain('dataplane_replica_ejections_total{upstream="r-0"} 1');
    // r-0 leaves the snapshot (its replica stopped): its series goes with it.
    const next = snapshotWith([b.url]);
    next.endpoints.find((x) => x.name === NAME)!.upstreams[0]!.id = 'r-1';
    dp.store.replace({ ...next, version: 2 });
    const after = await (await fetch(dp.metricsUrl)).text();
    expect(after).not.toContain('upstream="r-0"');
    expect(after).toContain('# TYPE dataplane_replica_ejections_total counter');
  });

  it('with every replica ejected still tries one (and recovers on success)', async () => {
    a.sim.setFaults({ errorStatus: 500 });
    const { chat } = await start([a.url], { ejection: { failures: 1, cooldownMs: 60_000 } });
    expect((await post(chat, chatBody({ model: NAME }))).status).toBe(502);
    a.sim.setFaults({});
    expect((await post(chat, chatBody({ model: NAME }))).status).toBe(200);
  });
});
