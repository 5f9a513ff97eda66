import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, SECRET_B, chatBody, deadUrl, makeSnapshot, memorySink, startDataplane, startSim } from '../../test/helpers.ts';
import type { StartedApp, StartedSim } from '../../test/helpers.ts';

// The same request, once on the fast path (plain URL) and once through Fastify's routes (a trailing slash
// makes the fast path step aside), must get the same answer.
let sim: StartedSim;
let dp: StartedApp;
beforeAll(async () => {
  sim = await startSim();
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), memorySink());
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

const HEADERS = ['content-type', 'x-request-id', 'access-control-allow-origin', 'access-control-expose-headers', 'connection'];

async function both(path: string, body: string, key: string | null, extra: Record<string, string> = {}) {
  const send = async (p: string) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': 'same-id', ...extra };
    if (key !== null) headers['authorization'] = `Bearer ${key}`;
    const res = await fetch(`${dp.url}${p}`, { method: 'POST', headers, body });
    const text = await res.text();
    // Completion ids and timestamps differ between two answers.
    const stable = text.replace(/"id":"[^"]*"/g, '"id":"x"').replace(/"created":\d+/g, '"created":0');
    return { status: res.status, body: stable, headers: HEADERS.map((h) => res.headers.get(h)) };
  };
  return { fast: await send(path), routed: await send(`${path}/`) };
}

describe('chat fast path', () => {
  const shared = '/endpoints/v1/chat/completions';
  const dedicated = '/funccall/acme/endpoints/llama-3-8b-instruct/v1/chat/completions';
  const cases: [string, string, string, string | null][] = [
    ['no key', shared, JSON.stringify(chatBody({ model: NAME })), null],
    ['unknown key', shared, JSON.stringify(chatBody({ model: NAME })), 'infk_nope'],
    ['malformed JSON', shared, '{"model":', SECRET_A],
    ['prototype poisoning', shared, `{"model":"${NAME}","__proto__":{"x":1},"messages":[{"role":"user","content":"hi"}]}`, SECRET_A],
    ['not an object', shared, '[1,2]', SECRET_A],
    ['no model', shared, JSON.stringify(chatBody()), SECRET_A],
    ['unknown model', shared, JSON.stringify(chatBody({ model: 'nope' })), SECRET_A],
    ['string-coded fields', shared, JSON.stringify(chatBody({ model: NAME, max_tokens: '4', temperature: '0.5' })), SECRET_A],
    ['json answer', shared, JSON.stringify(chatBody({ model: NAME })), SECRET_A],
    ['stream answer', shared, JSON.stringify(chatBody({ model: NAME, stream: true })), SECRET_A],
    ['dedicated answer', dedicated, JSON.stringify(chatBody({ model: `meta/${NAME}` })), SECRET_A],
    ['dedicated, other tenant', dedicated, JSON.stringify(chatBody()), SECRET_B],
    ['dedicated, wrong model', dedicated, JSON.stringify(chatBody({ model: 'other' })), SECRET_A],
    ['unknown deployment', '/funccall/acme/endpoints/nope/v1/chat/completions', JSON.stringify(chatBody()), SECRET_A],
  ];
  for (const [name, path, body, key] of cases) {
    it(`answers like the Fastify routes: ${name}`, async () => {
      const { fast, routed } = await both(path, body, key, { origin: 'https://console.example' });
      expect(fast).toEqual(routed);
    });
  }

  it('leaves other content types and methods to Fastify', async () => {
    const res = await fetch(`${dp.url}${shared}`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', authorization: `Bearer ${SECRET_A}` },
      body: 'hi',
    });
    expect(res.status).toBe(415);
    const get = await fetch(`${dp.url}${shared}`);
    expect(get.status).toBe(405);
  });
});
