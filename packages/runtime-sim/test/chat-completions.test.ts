import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countPromptTokens, countTokens } from '../src/index.ts';
import { postChat, startSim, userMessages, type StartedSim } from './sim-helpers.ts';

let s: StartedSim;
beforeAll(async () => {
  s = await startSim({ models: ['sim-a', 'sim-b'], maxContextLength: 200 });
});
afterAll(() => s.sim.close());

interface ChatJson {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: { index: number; message: { role: string; content: string }; finish_reason: string }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

async function chat(body: Record<string, unknown>): Promise<ChatJson> {
  const res = await postChat(s.url, { model: 'sim-a', ...body });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('application/json');
  return (await res.json()) as ChatJson;
}

describe('POST /v1/chat/completions (JSON)', () => {
  it('answers in the chat.completion shape with consistent usage', async () => {
    const messages = userMessages('Tell me about GPUs, briefly.');
    const body = await chat({ messages });
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(body.object).toBe('chat.completion');
    expect(body.created).toBeCloseTo(Date.now() / 1000, -2);
    expect(body.model).toBe('sim-a');
    expect(body.choices).toHaveLength(1);
    const choice = body.choices[0]!;
    expect(choice).toMatchObject({ index: 0, message: { role: 'assistant' }, finish_reason: 'stop' });
    expect(choice.message.content.length).toBeGreaterThan(0);
    expect(body.usage.prompt_tokens).toBe(countPromptTokens(messages));
    expect(body.usage.completion_tokens).toBe(countTokens(choice.message.content));
    expect(body.usage.completion_tokens).toBeGreaterThanOrEqual(16);
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(64);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
  });

  it('serves every configured model name and echoes it', async () => {
    const body = await chat({ model: 'sim-b', messages: userMessages('hi') });
    expect(body.model).toBe('sim-b');
  });

  it('is deterministic for the same prompt and seed and differs across seeds', async () => {
    const messages = userMessages('determinism please');
    const a = await chat({ messages, seed: 7 });
    const b = await chat({ messages, seed: 7 });
    const c = await chat({ messages, seed: 8 });
    const unseeded1 = await chat({ messages });
    const unseeded2 = await chat({ messages });
    expect(a.choices[0]!.message.content).toBe(b.choices[0]!.message.content);
    expect(c.choices[0]!.message.content).not.toBe(a.choices[0]!.message.content);
    expect(unseeded1.choices[0]!.message.content).toBe(unseeded2.choices[0]!.message.content);
    expect(a.id).not.toBe(b.id);
  });

  it('stops at max_tokens with finish_reason length', async () => {
    const body = await chat({ messages: userMessages('count'), max_tokens: 7 });
    expect(body.choices[0]!.finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(7);
    expect(countTokens(body.choices[0]!.message.content)).toBe(7);
  });

  it('cuts before a stop string and finishes with stop', async () => {
    const messages = userMessages('stop test');
    const full = (await chat({ messages, seed: 3, max_tokens: 40 })).choices[0]!.message.content;
    const words = full.split(' ');
    const stop = ` ${words[Math.floor(words.length / 2)]!}`;
    const expected = full.slice(0, full.indexOf(stop));
    const body = await chat({ messages, seed: 3, max_tokens: 40, stop: ['never-there', stop] });
    expect(body.choices[0]!.message.content).toBe(expected);
    expect(body.choices[0]!.finish_reason).toBe('stop');
    expect(body.usage.completion_tokens).toBe(countTokens(expected));
  });

  it('404s an unknown model with an OpenAI error body', async () => {
    const res = await postChat(s.url, { model: 'gpt-nope', messages: userMessages('hi') });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      error: { message: 'The model `gpt-nope` does not exist.', type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
    });
  });

  it('400s bad input with OpenAI-shaped errors', async () => {
    const cases: [unknown, string][] = [
      ['{not json', 'invalid_json'],
      [{ model: 'sim-a' }, 'invalid_request'],
      [{ model: 'sim-a', messages: [] }, 'invalid_request'],
      [{ model: 'sim-a', messages: userMessages('x'), n: 2 }, 'invalid_request'],
      [{ model: 'sim-a', messages: userMessages('x'), max_tokens: 'lots' }, 'invalid_request'],
    ];
    for (const [body, code] of cases) {
      const res = await postChat(s.url, body);
      expect(res.status).toBe(400);
      const json = (await res.json()) as { error: { code: string; type: string; message: string } };
      expect(json.error).toMatchObject({ code, type: 'invalid_request_error' });
    }
  });

  it('caps the completion at max_completion_tokens before the deprecated max_tokens, as vLLM does', async () => {
    const res = await postChat(s.url, { model: 'sim-a', messages: userMessages('x'), max_tokens: 7, max_completion_tokens: 3 });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { usage: { completion_tokens: number } };
    expect(json.usage.completion_tokens).toBe(3);
    const bad = await postChat(s.url, { model: 'sim-a', messages: userMessages('x'), max_tokens: 7, max_completion_tokens: 0 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('max_completion_tokens');
  });

  it('400s a prompt plus max_tokens over the context length', async () => {
    const overMax = await postChat(s.url, { model: 'sim-a', messages: userMessages('short'), max_tokens: 190 });
    expect(overMax.status).toBe(400);
    const json = (await overMax.json()) as { error: { code: string; message: string } };
    expect(json.error.code).toBe('context_length_exceeded');
    expect(json.error.message).toMatch(/maximum context length is 200 tokens/);
    const longPrompt = await postChat(s.url, { model: 'sim-a', messages: userMessages('word '.repeat(250)) });
    expect(longPrompt.status).toBe(400);
    const fits = await postChat(s.url, { model: 'sim-a', messages: userMessages('short'), max_tokens: 150 });
    expect(fits.status).toBe(200);
  });
});

describe('other routes', () => {
  it('lists models in the OpenAI list shape', async () => {
    const res = await fetch(`${s.url}/v1/models`);
    const body = (await res.json()) as { object: string; data: { id: string; object: string; max_model_len: number }[] };
    expect(body.object).toBe('list');
    expect(body.data.map((m) => m.id)).toEqual(['sim-a', 'sim-b']);
    expect(body.data[0]).toMatchObject({ object: 'model', max_model_len: 200 });
  });

  it('exposes vLLM metric names with counts that move', async () => {
    const before = await (await fetch(`${s.url}/metrics`)).text();
    await chat({ messages: userMessages('metrics'), max_tokens: 5 });
    const text = await (await fetch(`${s.url}/metrics`)).text();
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:num_aborted_requests_total']) {
      expect(text).toMatch(new RegExp(`^${name}\\{model_name="sim-a"\\} 0$`, 'm'));
    }
    const gen = (t: string) => Number(/^vllm:generation_tokens_total\{model_name="sim-a"\} (\d+)$/m.exec(t)?.[1]);
    expect(gen(text) - gen(before)).toBe(5);
    expect(text).toMatch(/^vllm:prompt_tokens_total\{model_name="sim-a"\} [1-9]\d*$/m);
  });

  it('answers unknown routes with a JSON 404', async () => {
    const res = await fetch(`${s.url}/v2/nothing`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });
});

describe('apiKey', () => {
  it('requires the bearer on /v1 routes but not on /health', async () => {
    const locked = await startSim({ apiKey: 'secret' });
    try {
      expect((await postChat(locked.url, { messages: userMessages('x') })).status).toBe(401);
      expect((await postChat(locked.url, { messages: userMessages('x') }, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
      expect((await postChat(locked.url, { messages: userMessages('x') }, { headers: { authorization: 'Bearer secret' } })).status).toBe(200);
      expect((await fetch(`${locked.url}/health`)).status).toBe(200);
    } finally {
      await locked.sim.close();
    }
  });
});
