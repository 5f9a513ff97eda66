import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, chatBody, deadUrl, makeSnapshot, memorySink, post, startDataplane, startSim, waitFor, dataLines } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

let sim: StartedSim;
let dp: StartedApp;
const sink = memorySink();

beforeAll(async () => {
  sim = await startSim({ itlMs: 20 });
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), sink);
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

describe('streams', () => {
  it('forwards chunks as they arrive (first chunk before the stream ends)', async () => {
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME, stream: true, max_tokens: 20 }));
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    const firstText = Buffer.from(first.value!).toString('utf8');
    expect(firstText).not.toContain('[DONE]');
    let rest = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += Buffer.from(value).toString('utf8');
    }
    expect(rest.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('ends a stream cut by the runtime with an error event and [DONE]', async () => {
    sim.sim.setFaults({ cutAfterTokens: 3 });
    let text: string;
    try {
      const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME, stream: true, max_tokens: 20 }), SECRET_A, {
        'x-request-id': 'cut-1',
      });
      expect(res.status).toBe(200);
      text = await res.text();
    } finally {
      sim.sim.setFaults({});
    }
    const data = dataLines(text);
    expect(data.at(-1)).toBe('[DONE]');
    const err = JSON.parse(data.at(-2)!) as { error: { type: string; code: string } };
    expect(err.error.code).toBe('upstream_error');
    expect(data.filter((d) => d.includes('"content"')).length).toBeGreaterThanOrEqual(1);
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('cut-1.')));
    const rec = sink.records.find((r) => r.requestId.startsWith('cut-1.'))!;
    expect(rec.status).toBe(502);
    expect(rec.estimated).toBe(true);
  });

  it('aborts the upstream request when the client goes away mid-stream', async () => {
    const ac = new AbortController();
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME, stream: true, max_tokens: 500 }), SECRET_A, {
      'x-request-id': 'abort-1',
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    ac.abort();
    await waitFor(() => sim.sim.stats().requests.find((e) => e.id.startsWith('chatcmpl-abort-1.'))?.aborted === true);
    const entry = sim.sim.stats().requests.find((e) => e.id.startsWith('chatcmpl-abort-1.'))!;
    expect(entry.completionTokens).toBeLessThan(500);
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('abort-1.')));
    expect(sink.records.find((r) => r.requestId.startsWith('abort-1.'))!.status).toBe(499);
  });

  it('handles data lines split across TCP chunks and multi-byte characters', async () => {
    const { createServer } = await import('node:http');
    const model = 'sim-llama';
    const events = [
      `data: {"id":"x","object":"chat.completion.chunk","model":"${model}","choices":[{"index":0,"delta":{"content":"héllo ✓ 世界"}}]}\n\n`,
      `data: {"id":"x","object":"chat.completion.chunk","model":"${model}","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}\n\n`,
      'data: [DONE]\n\n',
    ];
    const bytes = Buffer.from(events.join(''));
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Split every 5 bytes (cutting inside UTF-8 characters and JSON tokens).
      let i = 0;
      const tick = setInterval(() => {
        if (i >= bytes.length) {
          clearInterval(tick);
          res.end();
          return;
        }
        res.write(bytes.subarray(i, i + 5));
        i += 5;
      }, 1);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    const snap = makeSnapshot({ sim: `http://127.0.0.1:${port}`, faulty: sim.url, dead: await deadUrl() });
    const local = memorySink();
    const split = await startDataplane(snap, local);
    try {
      const res = await post(`${split.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME, stream: true }), SECRET_A, { 'x-request-id': 'split-1' });
      const data = dataLines(await res.text());
      expect(data).toHaveLength(2);
      const chunk = JSON.parse(data[0]!) as { model: string; choices: { delta: { content: string } }[] };
      expect(chunk.model).toBe(NAME);
      expect(chunk.choices[0]!.delta.content).toBe('héllo ✓ 世界');
      expect(data[1]).toBe('[DONE]');
      await waitFor(() => local.records.length === 1);
      expect(local.records[0]).toMatchObject({ promptTokens: 7, completionTokens: 3, estimated: false, status: 200 });
    } finally {
      await split.app.close();
      server.closeAllConnections();
      server.close();
    }
  });
});
