import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { NAME, SECRET_A, SECRET_B, chatBody, useSimDataplane } from '../../test/helpers.ts';

// The same request, once on the fast path (plain URL) and once through Fastify's routes (a trailing slash
// makes the fast path step aside), must get the same answer.
const world = useSimDataplane();

const HEADERS = ['content-type', 'x-request-id', 'access-control-allow-origin', 'access-control-expose-headers', 'connection'];

async function both(path: string, body: string, key: string | null, extra: Record<string, string> = {}) {
  const send = async (p: string) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': 'same-id', ...extra };
    if (key !== null) headers['authorization'] = `Bearer ${key}`;
    const res = await fetch(`${world.dp.url}${p}`, { method: 'POST', headers, body });
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
    const res = await fetch(`${world.dp.url}${shared}`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', authorization: `Bearer ${SECRET_A}` },
      body: 'hi',
    });
    expect(res.status).toBe(415);
    const get = await fetch(`${world.dp.url}${shared}`);
    expect(get.status).toBe(405);
  });

  /** One request written as raw bytes (field names in any case, fields repeated); the answer's status, request id and body. */
  function raw(path: string, fields: readonly string[], body: string): Promise<{ status: number; requestId: string | null; body: string }> {
    return new Promise((resolve, reject) => {
      const socket = connect(Number(new URL(world.dp.url).port), '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const [head = '', rest = ''] = text.split('\r\n\r\n');
        const requestId = /\r\nx-request-id: ([^\r]*)/i.exec(head)?.[1] ?? null;
        const stable = rest.replace(/"id":"[^"]*"/g, '"id":"x"').replace(/"created":\d+/g, '"created":0');
        resolve({ status: Number(head.slice(9, 12)), requestId, body: stable });
      });
      const lines = [`POST ${path} HTTP/1.1`, 'Host: x', 'Connection: close', ...fields, `Content-Length: ${Buffer.byteLength(body)}`];
      socket.write(`${lines.join('\r\n')}\r\n\r\n${body}`);
    });
  }

  it('reads field names in any case, and repeated fields as Node does (first wins, or joined), like the Fastify routes', async () => {
    const body = JSON.stringify(chatBody({ model: NAME }));
    const cases: [string, string[], number, string | null][] = [
      ['Title-Case names', ['Content-Type: application/json', `Authorization: Bearer ${SECRET_A}`, 'X-Request-Id: title-1'], 200, 'title-1'],
      ['UPPER-CASE names', ['CONTENT-TYPE: application/json', `AUTHORIZATION: Bearer ${SECRET_A}`, 'X-REQUEST-ID: upper-1'], 200, 'upper-1'],
      // Repeated: joined with ", " (not a plain id any more: a fresh one is made).
      ['x-request-id twice', ['content-type: application/json', `authorization: Bearer ${SECRET_A}`, 'x-request-id: a', 'x-request-id: b'], 200, null],
      // Repeated: the first wins.
      [
        'authorization twice, the good key first',
        ['content-type: application/json', `authorization: Bearer ${SECRET_A}`, 'authorization: Bearer infk_nope'],
        200,
        null,
      ],
      [
        'authorization twice, a bad key first',
        ['content-type: application/json', 'authorization: Bearer infk_nope', `authorization: Bearer ${SECRET_A}`],
        401,
        null,
      ],
      ['content-type twice', ['content-type: application/json', 'content-type: text/plain', `authorization: Bearer ${SECRET_A}`], 200, null],
    ];
    for (const [name, fields, status, id] of cases) {
      const fast = await raw(shared, fields, body);
      const routed = await raw(`${shared}/`, fields, body);
      expect({ name, status: fast.status }).toEqual({ name, status });
      expect({ name, body: fast.body, status: fast.status }).toEqual({ name, body: routed.body, status: routed.status });
      if (id !== null) expect(fast.requestId).toBe(id);
      else expect(fast.requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
  });
});
