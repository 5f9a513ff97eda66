// Requests that are wrong at the HTTP level or in ways a parser hides: Node's parser refusals, prototype keys,
// Content-Encoding, wrong methods, stream_options without stream. Each chat case runs on the fast path
// (Content-Length) and on Fastify's route (chunked).
import type { IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { NAME, chatBody, sendRequest, useSimDataplane } from './helpers.ts';
import type { RawAnswer, SendOptions } from './helpers.ts';

const world = useSimDataplane();

const SHARED = '/endpoints/v1/chat/completions';
const DEDICATED = `/funccall/acme/endpoints/${NAME}/v1/chat/completions`;
const PATHS = [
  { label: 'raw fast path', chunked: false },
  { label: 'Fastify route (chunked)', chunked: true },
] as const;

interface OpenAIError {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

const errorOf = (a: { text: string }): OpenAIError => (JSON.parse(a.text) as { error: OpenAIError }).error;

const send = (path: string, o: SendOptions = {}): Promise<RawAnswer> => sendRequest(world.dp.url, path, o);

/** Raw bytes on a fresh connection; everything the server wrote before the connection closed. */
function raw(bytes: string): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(Number(new URL(world.dp.url).port), '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {}); // a reset after the answer: what was read is the answer
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      const [statusLine = '', ...fields] = head.split('\r\n');
      const headers: IncomingHttpHeaders = {};
      for (const f of fields) headers[f.slice(0, f.indexOf(':')).toLowerCase()] = f.slice(f.indexOf(':') + 1).trim();
      resolve({ status: Number(statusLine.split(' ')[1]), headers, text: body });
    });
    socket.write(bytes);
  });
}

const ok = JSON.stringify(chatBody({ model: NAME }));

describe("requests Node's HTTP parser refuses", () => {
  it('get OpenAI-shaped errors with their status and connection: close', async () => {
    const cases: [string, string, number][] = [
      ['20 KB URL', `GET /endpoints/v1/models?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431],
      ['20 KB header', `GET /endpoints/v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`, 431],
      ['malformed request line', 'THIS IS NOT HTTP\r\n\r\n', 400],
      ['Content-Length with Transfer-Encoding', `POST ${SHARED} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 400],
    ];
    for (const [label, bytes, status] of cases) {
      const a = await raw(bytes);
      expect(a.status, label).toBe(status);
      expect(a.headers['connection'], label).toBe('close');
      expect(a.headers['content-type'], label).toContain('application/json');
      const e = errorOf(a);
      expect(e.type, label).toBe('invalid_request_error');
      expect(e.param, label).toBeNull();
      expect(e.message.length, label).toBeGreaterThan(10);
      expect(Number(a.headers['content-length']), label).toBe(Buffer.byteLength(a.text));
    }
    expect(errorOf(await raw(cases[3]![1])).message).toContain('Transfer-Encoding');
  });
});

describe.each(PATHS)('on the $label', ({ chunked }) => {
  it('a body with a __proto__ or constructor.prototype key is a 400 that names the key, not "not valid JSON"', async () => {
    const cases: [string, string][] = [
      [`{"__proto__":{"x":1},"model":"${NAME}","messages":[{"role":"user","content":"hi"}]}`, '__proto__'],
      [`{"model":"${NAME}","messages":[{"role":"user","content":"hi","constructor":{"prototype":{"x":1}}}]}`, 'messages[0].constructor.prototype'],
    ];
    for (const path of [SHARED, DEDICATED]) {
      for (const [body, param] of cases) {
        const a = await send(path, { body, chunked });
        expect(a.status, `${path} ${body}`).toBe(400);
        const e = errorOf(a);
        expect(e).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request', param });
        expect(e.message).not.toContain('not valid JSON');
        expect(e.message).toContain(param.endsWith('prototype') ? "'constructor.prototype'" : "'__proto__'");
      }
      // Real syntax errors keep their answer.
      const bad = await send(path, { body: '{"model":', chunked });
      expect(errorOf(bad)).toMatchObject({ code: 'invalid_json', message: 'The request body is not valid JSON.' });
    }
  });

  it('a Content-Encoding other than identity is a 415 naming it; identity is served', async () => {
    for (const path of [SHARED, DEDICATED]) {
      for (const [encoding, body] of [
        ['gzip', gzipSync(ok)],
        ['br', Buffer.from(ok)],
        ['deflate, gzip', Buffer.from(ok)],
      ] as const) {
        const a = await send(path, { body, chunked, headers: { 'content-encoding': encoding } });
        expect(a.status, `${path} ${encoding}`).toBe(415);
        const e = errorOf(a);
        expect(e).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_media_type' });
        expect(e.message).toContain(`'${encoding}'`);
      }
      const plain = await send(path, { body: ok, chunked, headers: { 'content-encoding': 'identity' } });
      expect(plain.status, plain.text).toBe(200);
    }
  });

  it("stream_options without stream: true is a 400 naming 'stream_options', as OpenAI answers", async () => {
    for (const path of [SHARED, DEDICATED]) {
      for (const extra of [{ stream: false }, {}, { stream: 'false' }]) {
        const body = JSON.stringify(chatBody({ model: NAME, ...extra, stream_options: { include_usage: true } }));
        const a = await send(path, { body, chunked });
        expect(a.status, `${path} ${body}`).toBe(400);
        expect(errorOf(a)).toEqual({
          message: "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
          type: 'invalid_request_error',
          param: 'stream_options',
          code: 'invalid_request',
        });
      }
      // null means unset; with stream: true (or "true") it is what the option is for.
      const unset = await send(path, { body: JSON.stringify(chatBody({ model: NAME, stream: false, stream_options: null })), chunked });
      expect(unset.status, unset.text).toBe(200);
      for (const stream of [true, 'true']) {
        const streamed = await send(path, { body: JSON.stringify(chatBody({ model: NAME, stream, stream_options: { include_usage: true } })), chunked });
        expect(streamed.status, streamed.text).toBe(200);
        expect(streamed.text).toContain('data: [DONE]');
      }
    }
  });

  it('tools, tool_choice, response_format, logprobs, penalties and user that OpenAI refuses are 400s naming the field', async () => {
    const fn = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } };
    const refused: [Record<string, unknown>, string, RegExp][] = [
      [{ tools: [] }, 'tools', /must not be empty/],
      [{ tools: {} }, 'tools', /./],
      [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools[0].function.name', /letters, digits/],
      [{ tools: [{ type: 'function' }] }, 'tools[0].function.name', /letters, digits/],
      [{ tool_choice: 'required' }, 'tool_choice', /only allowed when 'tools' are specified/],
      [{ tool_choice: { type: 'function', function: { name: 'get_weather' } } }, 'tool_choice', /only allowed when 'tools'/],
      [{ tools: [fn], tool_choice: 'always' }, 'tool_choice', /'none', 'auto', 'required'/],
      [
        { tools: [fn], tool_choice: { type: 'function', function: { name: 'get_time' } } },
        'tool_choice',
        /names the function 'get_time', which is not in 'tools'/,
      ],
      [{ stop: [1] }, 'stop', /must be a string or an array of at most 4 strings/],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', /must be a string or an array of at most 4 strings/],
      [{ response_format: { type: 'xml' } }, 'response_format.type', /text, json_object, json_schema/],
      [{ response_format: { type: 'json_schema' } }, 'response_format.json_schema', /'name'/],
      [{ logprobs: 'yes' }, 'logprobs', /boolean/],
      [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs', /./],
      [{ top_logprobs: 2 }, 'top_logprobs', /'logprobs' must be set to true/],
      [{ presence_penalty: 3 }, 'presence_penalty', /./],
      [{ frequency_penalty: -2.5 }, 'frequency_penalty', /./],
      [{ user: 5 }, 'user', /string/],
      [{ tools: [{ type: 'retrieval' }] }, 'tools[0].type', /'function' or 'custom'/],
      [{ logit_bias: { '1': 200 } }, 'logit_bias.1', /between -100 and 100/],
      [{ logit_bias: { abc: 1 } }, 'logit_bias.abc', /token ids/],
      [{ logit_bias: [1] }, 'logit_bias', /mapping token ids/],
    ];
    for (const path of [SHARED, DEDICATED]) {
      for (const [extra, param, message] of refused) {
        const a = await send(path, { body: JSON.stringify(chatBody({ model: NAME, ...extra })), chunked });
        expect(a.status, `${path} ${JSON.stringify(extra)}: ${a.text}`).toBe(400);
        const e = errorOf(a);
        expect(e, JSON.stringify(extra)).toMatchObject({ type: 'invalid_request_error', param });
        expect(e.message, JSON.stringify(extra)).toMatch(message);
      }
      // The forms OpenAI takes are served, and null means unset.
      for (const extra of [
        { tools: [fn], tool_choice: 'required' },
        { tools: [fn], tool_choice: { type: 'function', function: { name: 'get_weather' } } },
        { tool_choice: 'auto' },
        { tools: null, tool_choice: null, response_format: null, logprobs: null, top_logprobs: null, user: null },
        { response_format: { type: 'json_object' } },
        { response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' } } } },
        { logprobs: true, top_logprobs: 20 },
        { presence_penalty: -2, frequency_penalty: 2, user: 'user-1234' },
        { logit_bias: { '50256': -100, '15': 100, '7': 0.5 } },
        { logit_bias: null },
      ]) {
        const a = await send(path, { body: JSON.stringify(chatBody({ model: NAME, ...extra })), chunked });
        expect(a.status, `${path} ${JSON.stringify(extra)}: ${a.text}`).toBe(200);
      }
    }
  });
});

describe('wrong methods on known paths', () => {
  it('answer 405 method_not_allowed with an allow header, without a key, on every route', async () => {
    const modelPaths = [
      '/endpoints/v1/models',
      `/endpoints/v1/models/${NAME}`,
      `/funccall/acme/endpoints/${NAME}/v1/models`,
      `/funccall/acme/endpoints/${NAME}/v1/models/${NAME}`,
    ];
    const cases: [string, string, string][] = [
      ...modelPaths.flatMap((p) => ['POST', 'PUT', 'PATCH', 'DELETE'].map((m): [string, string, string] => [m, p, 'GET, HEAD, OPTIONS'])),
      ...[SHARED, DEDICATED].flatMap((p) => ['GET', 'PUT', 'PATCH', 'DELETE'].map((m): [string, string, string] => [m, p, 'POST, OPTIONS'])),
      ['POST', '/healthz', 'GET, HEAD'],
      ['DELETE', '/readyz', 'GET, HEAD'],
      ['OPTIONS', '/healthz', 'GET, HEAD'],
      ['DELETE', '/endpoints/v1/models/', 'GET, HEAD, OPTIONS'],
    ];
    for (const [method, path, allow] of cases) {
      const a = await send(path, { method, body: method === 'GET' ? undefined : '{}', headers: { authorization: '' } });
      expect(a.status, `${method} ${path}`).toBe(405);
      expect(a.headers['allow'], `${method} ${path}`).toBe(allow);
      expect(errorOf(a)).toMatchObject({ type: 'invalid_request_error', code: 'method_not_allowed' });
      expect(a.headers['x-request-id']).toBeTruthy();
    }
    // Right methods and unknown paths are unchanged.
    expect((await send('/endpoints/v1/models', { method: 'GET' })).status).toBe(200);
    expect((await send('/endpoints/v1/models', { method: 'HEAD' })).status).toBe(200);
    const unknown = await send('/endpoints/v1/nothing', { method: 'GET' });
    expect(unknown.status).toBe(404);
    expect(errorOf(unknown).code).toBe('not_found');
  });
});
