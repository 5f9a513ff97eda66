import { afterEach, describe, expect, it } from 'vitest';
import { openSse, postChat, readSse, startSim, userMessages, waitFor, type StartedSim } from './sim-helpers.ts';

interface Chunk {
  id: string;
  object: string;
  model: string;
  choices: { index: number; delta: { role?: string; content?: string }; finish_reason: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

let s: StartedSim | undefined;
afterEach(() => s?.sim.close());

describe('streaming', () => {
  it('frames one chunk per token, a finish chunk and [DONE], without usage by default', async () => {
    s = await startSim();
    const messages = userMessages('stream me');
    const res = await postChat(s.url, { messages, stream: true, max_tokens: 5, seed: 1 });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const { data, error } = await readSse(res);
    expect(error).toBeNull();
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
    expect(chunks).toHaveLength(6);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'sim-model')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.slice(1, 5).every((c) => c.choices[0]!.delta.role === undefined)).toBe(true);
    expect(chunks.slice(0, 5).every((c) => c.choices[0]!.finish_reason === null && typeof c.choices[0]!.delta.content === 'string')).toBe(true);
    expect(chunks[5]!.choices[0]).toMatchObject({ delta: {}, finish_reason: 'length' });
    expect(chunks.some((c) => c.usage)).toBe(false);

    // The streamed text is the JSON-mode text.
    const json = (await (await postChat(s.url, { messages, max_tokens: 5, seed: 1 })).json()) as { choices: { message: { content: string } }[] };
    expect(chunks.map((c) => c.choices[0]!.delta.content ?? '').join('')).toBe(json.choices[0]!.message.content);
  });

  it('adds a usage chunk with empty choices only when include_usage is set', async () => {
    s = await startSim();
    const res = await postChat(s.url, { messages: userMessages('usage'), stream: true, stream_options: { include_usage: true } });
    const { data } = await readSse(res);
    expect(data.at(-1)).toBe('[DONE]');
    const usageChunk = JSON.parse(data.at(-2)!) as Chunk;
    const finish = JSON.parse(data.at(-3)!) as Chunk;
    expect(finish.choices[0]!.finish_reason).toBe('stop');
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage!.completion_tokens).toBe(data.length - 3);
    expect(usageChunk.usage!.total_tokens).toBe(usageChunk.usage!.prompt_tokens + usageChunk.usage!.completion_tokens);
  });

  it('writes chunks as they are produced when there is inter-token latency', async () => {
    s = await startSim({ ttftMs: 20, itlMs: 60 });
    const started = Date.now();
    const res = await postChat(s.url, { messages: userMessages('slow'), stream: true, max_tokens: 6 });
    const sse = openSse(res);
    const first = await sse.read(1);
    const firstAt = Date.now() - started;
    const { data } = await sse.read();
    const totalAt = Date.now() - started;
    expect(first.data).toHaveLength(1);
    expect(data.at(-1)).toBe('[DONE]');
    expect(totalAt).toBeGreaterThanOrEqual(5 * 60 - 20);
    expect(totalAt - firstAt).toBeGreaterThanOrEqual(4 * 60 - 20);
  });

  it('records a client abort mid-stream with the tokens produced so far and frees the slot', async () => {
    s = await startSim({ itlMs: 25, batchSlots: 1 });
    const controller = new AbortController();
    const res = await postChat(
      s.url,
      { messages: userMessages('abort me'), stream: true, max_tokens: 400 },
      { signal: controller.signal, headers: { 'x-request-id': 'abort-1' } },
    );
    const { data } = await readSse(res, 3);
    expect(data).toHaveLength(3);
    controller.abort();
    const sim = s.sim;
    await waitFor(() => sim.stats().totals.aborted === 1);
    const stats = sim.stats();
    const entry = stats.requests.find((r) => r.id === 'chatcmpl-abort-1')!;
    expect(entry).toMatchObject({ aborted: true, finishReason: 'abort', stream: true });
    expect(entry.abortedAt).toBeGreaterThan(0);
    expect(entry.completionTokens).toBeGreaterThanOrEqual(3);
    expect(entry.completionTokens).toBeLessThan(400);
    expect(stats.running).toBe(0);
    // Generation stopped: no more tokens are counted after the abort.
    await new Promise((r) => setTimeout(r, 150));
    expect(sim.stats().totals.completionTokens).toBe(entry.completionTokens);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/^vllm:num_aborted_requests_total\{model_name="sim-model"\} 1$/m);
    // The freed slot serves the next request.
    expect((await postChat(s.url, { messages: userMessages('next'), max_tokens: 2 })).status).toBe(200);
    const remote = (await (await fetch(`${s.url}/sim/stats`)).json()) as { totals: { aborted: number } };
    expect(remote.totals.aborted).toBe(1);
  });

  it('counts tokens by elapsed time for an aborted JSON request', async () => {
    s = await startSim({ itlMs: 20 });
    const controller = new AbortController();
    const pending = postChat(s.url, { messages: userMessages('json abort'), max_tokens: 500 }, { signal: controller.signal });
    const sim = s.sim;
    await waitFor(() => sim.stats().running === 1);
    await new Promise((r) => setTimeout(r, 200));
    controller.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => sim.stats().totals.aborted === 1);
    const entry = sim.stats().requests[0]!;
    expect(entry.completionTokens).toBeGreaterThan(1);
    expect(entry.completionTokens).toBeLessThan(500);
  });
});
