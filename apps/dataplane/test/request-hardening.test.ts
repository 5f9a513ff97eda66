import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exceedsJsonDepth } from '../src/proxy/json-depth.ts';
import { NAME, SECRET_A, chatBody, deadUrl, makeSnapshot, memorySink, startDataplane, startSim } from './helpers.ts';
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

const SHARED = '/endpoints/v1/chat/completions';
const DEDICATED = `/funccall/acme/endpoints/${NAME}/v1/chat/completions`;

/** POSTs a raw body: with Content-Length (the raw fast path) or chunked (Fastify's route). */
function send(path: string, body: string, chunked: boolean): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}` };
  if (!chunked) headers['content-length'] = String(Buffer.byteLength(body));
  return new Promise((resolve, reject) => {
    const req = request(`${dp.url}${path}`, { method: 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (chunked) {
      const half = Math.floor(body.length / 2);
      req.write(body.slice(0, half));
      req.end(body.slice(half));
    } else req.end(body);
  });
}

const gauge = async (): Promise<number> => {
  const m = await (await fetch(dp.metricsUrl)).text();
  const line = m.split('\n').find((l) => l.startsWith('dataplane_in_flight_requests '));
  if (line === undefined) throw new Error('no in-flight gauge');
  return Number(line.split(' ')[1]);
};

const PATHS = [
  { label: 'raw fast path', chunked: false },
  { label: 'Fastify route (chunked)', chunked: true },
] as const;

describe.each(PATHS)('finding 10, deeply nested JSON, on the $label', ({ chunked }) => {
  it('0.8 MB of nested arrays is a 400 and leaves nothing counted in flight', async () => {
    const depth = 400_000; // 800,000 bytes of brackets
    const attack = `{"model":"${NAME}","messages":[{"role":"user","content":${'['.repeat(depth)}${']'.repeat(depth)}}]}`;
    expect(attack.length).toBeGreaterThan(800_000);
    for (const path of [SHARED, DEDICATED]) {
      const a = await send(path, attack, chunked);
      expect(a.status).toBe(400);
      const err = (JSON.parse(a.text) as { error: { message: string; type: string; code: string } }).error;
      expect(err).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
      expect(err.message).toContain('64 levels');
    }
    expect(await gauge()).toBe(0);
    expect(dp.app.metricsUrl()).not.toBeNull();
    // The node still serves, and its gauge still returns to zero after ordinary traffic.
    const ok = await send(SHARED, JSON.stringify(chatBody({ model: NAME })), chunked);
    expect(ok.status).toBe(200);
    expect(await gauge()).toBe(0);
  });

  it('nesting up to the limit is not refused for its depth', async () => {
    const content = `${'['.repeat(60)}"x"${']'.repeat(60)}`;
    const body = `{"model":"${NAME}","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"metadata":${content}}`;
    const a = await send(SHARED, body, chunked);
    expect(a.status).toBe(200);
    expect(await gauge()).toBe(0);
  });
});

describe.each(PATHS)('finding 12, message roles, on the $label', ({ chunked }) => {
  it('an unknown role ("wizard") is a 400 naming messages[i].role', async () => {
    const body = chatBody({
      model: NAME,
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'wizard', content: 'abracadabra' },
      ],
    });
    for (const path of [SHARED, DEDICATED]) {
      const a = await send(path, JSON.stringify(body), chunked);
      expect(a.status).toBe(400);
      const err = (JSON.parse(a.text) as { error: { message: string; param: string; code: string } }).error;
      expect(err.param).toBe('messages[1].role');
      expect(err.message).toContain('messages[1].role');
      expect(err.message).toContain('system, user, assistant, tool, developer, function');
    }
  });

  it('a user, system or developer message without content, or a tool message without tool_call_id, is a 400 naming it', async () => {
    const cases: [unknown[], string][] = [
      [[{ role: 'user' }], 'messages[0].content'],
      [
        [
          { role: 'system', content: null },
          { role: 'user', content: 'hi' },
        ],
        'messages[0].content',
      ],
      [[{ role: 'user', content: 'hi' }, { role: 'developer' }], 'messages[1].content'],
      [
        [
          { role: 'user', content: 'hi' },
          { role: 'tool', content: '42' },
        ],
        'messages[1].tool_call_id',
      ],
    ];
    for (const [messages, param] of cases) {
      for (const path of [SHARED, DEDICATED]) {
        const a = await send(path, JSON.stringify(chatBody({ model: NAME, messages })), chunked);
        expect(a.status, JSON.stringify(messages)).toBe(400);
        expect((JSON.parse(a.text) as { error: { param: string } }).error.param).toBe(param);
      }
    }
    // What stays valid: an assistant turn with null content beside its tool calls, and the tool's answer to it.
    const toolTurn = [
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'w', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
    ];
    const ok = await send(SHARED, JSON.stringify(chatBody({ model: NAME, messages: toolTurn })), chunked);
    expect(ok.status).toBe(200);
  });

  it('every OpenAI role is accepted', async () => {
    for (const role of ['system', 'developer', 'user']) {
      const a = await send(SHARED, JSON.stringify(chatBody({ model: NAME, messages: [{ role, content: 'hi' }] })), chunked);
      expect(a.status).toBe(200);
    }
  });
});

describe('exceedsJsonDepth', () => {
  it('counts brackets outside strings only, without recursion', () => {
    expect(exceedsJsonDepth(`${'['.repeat(65)}${']'.repeat(65)}`)).toBe(true);
    expect(exceedsJsonDepth(`${'['.repeat(64)}${']'.repeat(64)}`)).toBe(false);
    expect(exceedsJsonDepth(JSON.stringify({ s: '['.repeat(1000) }))).toBe(false);
    expect(exceedsJsonDepth(JSON.stringify({ s: `\\"${'{'.repeat(1000)}` }))).toBe(false);
    expect(exceedsJsonDepth(`${'{"a":'.repeat(70)}1${'}'.repeat(70)}`)).toBe(true);
  });

  it('agrees with a walk of every character on random bodies (escaped quotes and backslashes, brackets in strings)', () => {
    // The plain definition: step through each character, skipping the one after a backslash inside a string.
    const reference = (text: string, max: number): boolean => {
      let depth = 0;
      let inString = false;
      for (let i = 0; i < text.length; i++) {
        const c = text[i];
        if (inString) {
          if (c === '\\') i++;
          else if (c === '"') inString = false;
        } else if (c === '"') inString = true;
        else if (c === '[' || c === '{') {
          if (++depth > max) return true;
        } else if (c === ']' || c === '}') depth--;
      }
      return false;
    };
    let seed = 12;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const pieces = ['[', ']', '{', '}', '"', '\\', '\\\\', '\\"', 'a', 'é', '東', ',', ':', ' '];
    let deep = 0;
    for (let n = 0; n < 3000; n++) {
      const max = 1 + rand(8);
      let text = '';
      const length = rand(120);
      for (let i = 0; i < length; i++) text += pieces[rand(pieces.length)];
      const want = reference(text, max);
      if (want) deep++;
      expect(exceedsJsonDepth(text, max), text).toBe(want);
    }
    // Both outcomes were exercised.
    expect(deep).toBeGreaterThan(100);
    expect(deep).toBeLessThan(2900);
  });
});
