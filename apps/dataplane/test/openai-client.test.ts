import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, SERVED, chatBody, deadUrl, makeSnapshot, memorySink, post, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

let sim: StartedSim;
let dp: StartedApp;
const sink = memorySink();

beforeAll(async () => {
  sim = await startSim();
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), sink);
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

const messages = [
  { role: 'system' as const, content: 'You are terse.' },
  { role: 'user' as const, content: 'Say hello.' },
];

describe('openai client against the shared surface', () => {
  const client = () => new OpenAI({ baseURL: `${dp.url}/endpoints/v1`, apiKey: SECRET_A, maxRetries: 0 });

  it('completes without streaming and reports the catalog name', async () => {
    const res = await client().chat.completions.create({ model: NAME, messages, max_tokens: 8 });
    expect(res.model).toBe(NAME);
    expect(res.choices[0]?.message.content).toBeTruthy();
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('streams chunk by chunk with the catalog name and no usage chunk unless asked', async () => {
    const stream = await client().chat.completions.create({ model: NAME, messages, max_tokens: 8, stream: true });
    let text = '';
    let usageChunks = 0;
    for await (const chunk of stream) {
      expect(chunk.model).toBe(NAME);
      if (chunk.usage) usageChunks++;
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usageChunks).toBe(0);
  });

  it('passes the usage chunk when the client asks for it', async () => {
    const stream = await client().chat.completions.create({
      model: NAME,
      messages,
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    });
    const usage = [];
    for await (const chunk of stream) if (chunk.usage) usage.push(chunk.usage);
    expect(usage).toHaveLength(1);
    expect(usage[0]?.completion_tokens).toBeGreaterThan(0);
  });

  it('lists published shared models only', async () => {
    const ids = [];
    for await (const m of client().models.list()) ids.push(m.id);
    expect(ids).toContain(NAME);
    expect(ids).not.toContain('unpublished-model');
    expect(ids).not.toContain('dedicated-only');
  });

  it('never leaks the served name', async () => {
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }));
    expect(await res.text()).not.toContain(SERVED);
  });
});

describe('openai client against the dedicated surface', () => {
  const client = () => new OpenAI({ baseURL: `${dp.url}/funccall/acme/endpoints/${NAME}/v1`, apiKey: SECRET_A, maxRetries: 0 });

  it('accepts the Name and a provider-prefixed model, answering with the name sent', async () => {
    const plain = await client().chat.completions.create({ model: NAME, messages, max_tokens: 4 });
    expect(plain.model).toBe(NAME);
    const prefixed = await client().chat.completions.create({ model: `Meta/${NAME}`, messages, max_tokens: 4 });
    expect(prefixed.model).toBe(`Meta/${NAME}`);
  });

  it('streams a provider-prefixed model', async () => {
    const stream = await client().chat.completions.create({ model: `meta/${NAME}`, messages, max_tokens: 4, stream: true });
    const models = new Set<string>();
    for await (const chunk of stream) models.add(chunk.model);
    expect([...models]).toEqual([`meta/${NAME}`]);
  });

  it('accepts an absent model (fetch) and answers with the Name', async () => {
    const res = await post(`${dp.url}/funccall/acme/endpoints/${NAME}/v1/chat/completions`, chatBody());
    expect(res.status).toBe(200);
    const body = (await res.json()) as { model: string };
    expect(body.model).toBe(NAME);
  });

  it('lists its one model', async () => {
    const page = await client().models.list();
    expect(page.data.map((m) => m.id)).toEqual([NAME]);
  });

  it('decodes a Name that contains a slash', async () => {
    const res = await post(`${dp.url}/funccall/acme/endpoints/${encodeURIComponent('meta/llama-slash')}/v1/chat/completions`, chatBody());
    expect(res.status).toBe(200);
    expect(((await res.json()) as { model: string }).model).toBe('meta/llama-slash');
  });
});

describe('string-typed parameters (spec examples)', () => {
  it('coerces "5", "true" and "0.7"', async () => {
    const res = await post(`${dp.url}/funccall/acme/endpoints/${NAME}/v1/chat/completions`, {
      model: `meta/${NAME}`,
      messages,
      max_tokens: '5',
      stream: 'true',
      temperature: '0.7',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const text = await res.text();
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(text).toContain(`"model":"meta/${NAME}"`);
    expect(text).not.toContain('"usage":{');
  });

  it('rejects max_tokens "five" naming the field', async () => {
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, { model: NAME, messages, max_tokens: 'five' });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { param: string; message: string; code: string } };
    expect(body.error.param).toBe('max_tokens');
    expect(body.error.code).toBe('invalid_request');
    expect(body.error.message).toMatch(/max_tokens/);
    expect(body.error.message).toMatch(/integer/);
  });

  it('echoes a sane x-request-id and replaces an odd one', async () => {
    const ok = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), SECRET_A, { 'x-request-id': 'trace-123' });
    await ok.text();
    expect(ok.headers.get('x-request-id')).toBe('trace-123');
    const odd = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), SECRET_A, { 'x-request-id': 'bad id with spaces' });
    await odd.text();
    expect(odd.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(sink.records.some((r) => r.requestId.startsWith('trace-123.'))).toBe(true);
  });
});
