import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ConfigSnapshot, UsageRecord } from '@infer/shared';
import { chatRequestSchema } from '@infer/shared';
import { describe, expect, it } from 'vitest';
import { NAME, SECRET_A, SECRET_B, chatBody, makeSnapshot, memorySink, sendRequest, startDataplane, useSimDataplane, waitFor } from './helpers.ts';
import type { RawAnswer, SendOptions } from './helpers.ts';

const sink = memorySink();
const world = useSimDataplane(sink, { bodyLimit: 4096 });
const send = (path: string, o: SendOptions = {}): Promise<RawAnswer> => sendRequest(world.dp.url, path, o);

const SHARED = '/endpoints/v1/chat/completions';
const DEDICATED = `/funccall/acme/endpoints/${NAME}/v1/chat/completions`;

const PATHS = [
  { label: 'fast path', chunked: false },
  { label: 'Fastify path (chunked body)', chunked: true },
] as const;

function errorOf(a: RawAnswer): { message: string; type: string; param: string | null; code: string | null } {
  expect(a.headers['content-type']).toContain('application/json');
  const body = JSON.parse(a.text) as { error: { message: string; type: string; param: string | null; code: string | null } };
  expect(typeof body.error.message).toBe('string');
  expect(typeof body.error.type).toBe('string');
  return body.error;
}

describe.each(PATHS)('spec quirks on the $label', ({ chunked }) => {
  it('dedicated: the provider-prefixed model of a Name that itself contains a slash', async () => {
    // Deployment 'meta/llama-slash' (provider 'meta'): its URL carries the Name encoded; the model may carry the provider.
    const path = `/funccall/acme/endpoints/${encodeURIComponent('meta/llama-slash')}/v1/chat/completions`;
    for (const model of [undefined, 'meta/llama-slash', 'Meta/meta/llama-slash']) {
      const a = await send(path, { chunked, body: chatBody(model === undefined ? {} : { model }) });
      expect(a.status, `${model} -> ${a.text}`).toBe(200);
      expect((JSON.parse(a.text) as { model: string }).model).toBe(model ?? 'meta/llama-slash');
    }
  });

  it('dedicated: model absent, the Name, or "<provider>/<Name>" (the provider in any case)', async () => {
    for (const model of [undefined, NAME, `meta/${NAME}`, `META/${NAME}`]) {
      const a = await send(DEDICATED, { chunked, body: chatBody(model === undefined ? {} : { model }) });
      expect(a.status, a.text).toBe(200);
      expect((JSON.parse(a.text) as { model: string }).model).toBe(model ?? NAME);
    }
  });

  it('coerces "256", "0.7", "false"/"true" and a string include_usage', async () => {
    const a = await send(DEDICATED, { chunked, body: chatBody({ model: `meta/${NAME}`, max_tokens: '5', temperature: '0.7', stream: 'false' }) });
    expect(a.status, a.text).toBe(200);
    const json = JSON.parse(a.text) as { object: string; usage: { completion_tokens: number } };
    expect(json.object).toBe('chat.completion');
    expect(json.usage.completion_tokens).toBeLessThanOrEqual(5);
    const s = await send(SHARED, { chunked, body: chatBody({ model: NAME, max_tokens: '4', stream: 'true', stream_options: { include_usage: 'true' } }) });
    expect(s.status, s.text).toBe(200);
    expect(s.headers['content-type']).toContain('text/event-stream');
    expect(s.text).toContain('"usage":{');
    expect(s.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    const n = await send(SHARED, { chunked, body: chatBody({ model: NAME, stream: 'true', stream_options: { include_usage: 'false' } }) });
    expect(n.status).toBe(200);
    expect(n.text).not.toContain('"usage":{');
  });

  it('Bearer scheme in any case, charset on the content type', async () => {
    for (const [scheme, ct] of [
      ['bearer', 'application/json; charset=utf-8'],
      ['BEARER', 'application/json;charset=UTF-8'],
      ['Bearer', 'Application/JSON'],
    ] as const) {
      const a = await send(SHARED, {
        chunked,
        key: null,
        headers: { authorization: `${scheme} ${SECRET_A}`, 'content-type': ct },
        body: chatBody({ model: NAME }),
      });
      expect(a.status, `${scheme} ${ct}: ${a.text}`).toBe(200);
    }
  });

  it('trailing slashes and URL-encoded endpoint names', async () => {
    for (const path of [
      `${SHARED}/`,
      `${DEDICATED}/`,
      `/funccall/acme/endpoints/${NAME.replace('-', '%2D')}/v1/chat/completions`,
      `/funccall/%61cme/endpoints/${NAME}/v1/chat/completions`,
    ]) {
      const a = await send(path, { chunked, body: chatBody({ model: NAME }) });
      expect(a.status, `${path}: ${a.text}`).toBe(200);
    }
  });

  it('bad input: OpenAI-shaped 4xx naming the field, never a 500, request id echoed', async () => {
    const cases: [unknown, number, string, string | null][] = [
      [chatBody({ model: NAME, stream: 'yes' }), 400, 'invalid_request', 'stream'],
      [chatBody({ model: NAME, max_tokens: 'abc' }), 400, 'invalid_request', 'max_tokens'],
      [chatBody({ model: NAME, max_tokens: '0' }), 400, 'invalid_request', 'max_tokens'],
      [chatBody({ model: NAME, temperature: 'hot' }), 400, 'invalid_request', 'temperature'],
      [chatBody({ model: NAME, stream_options: { include_usage: 'yes' } }), 400, 'invalid_request', 'stream_options.include_usage'],
      [chatBody({ model: 42 }), 400, 'invalid_request', 'model'],
      [{ model: NAME, messages: [] }, 400, 'invalid_request', 'messages'],
      [{ model: NAME, messages: [{ role: 'user', content: 5 }] }, 400, 'invalid_request', 'messages[0].content'],
      [[], 400, 'invalid_request', null],
      ['null', 400, 'invalid_request', null],
      ['"text"', 400, 'invalid_request', null],
      ['{"model":', 400, 'invalid_json', null],
      ['{"__proto__":{"x":1},"model":"m","messages":[]}', 400, 'invalid_request', '__proto__'],
    ];
    for (const [body, status, code, param] of cases) {
      const a = await send(SHARED, { chunked, body, headers: { 'x-request-id': 'bad-input-1' } });
      expect(a.status, `${JSON.stringify(body)}: ${a.text}`).toBe(status);
      const e = errorOf(a);
      expect(e.code).toBe(code);
      if (param !== null) expect(e.param).toBe(param);
      expect(a.headers['x-request-id']).toBe('bad-input-1');
    }
  });

  it('401 / 403 / 404 / 415 / 413 with the OpenAI body and the request id', async () => {
    const check = async (path: string, o: SendOptions, status: number, code: string) => {
      const a = await send(path, { chunked, ...o, headers: { 'x-request-id': 'err-id-1', ...o.headers } });
      expect(a.status, `${path}: ${a.text}`).toBe(status);
      expect(errorOf(a).code).toBe(code);
      expect(a.headers['x-request-id']).toBe('err-id-1');
    };
    await check(SHARED, { key: null, body: chatBody({ model: NAME }) }, 401, 'missing_api_key');
    await check(SHARED, { key: 'nope', body: chatBody({ model: NAME }) }, 401, 'invalid_api_key');
    await check(DEDICATED, { key: SECRET_B, body: chatBody() }, 403, 'permission_denied');
    await check(SHARED, { body: chatBody({ model: 'unpublished-model' }) }, 404, 'model_not_found');
    await check(SHARED, { body: chatBody({ model: 'dedicated-only' }) }, 404, 'model_not_found');
    await check(SHARED, { body: chatBody({ model: `meta/${NAME}` }) }, 404, 'model_not_found');
    await check(SHARED, { headers: { 'content-type': 'text/plain' }, body: JSON.stringify(chatBody({ model: NAME })) }, 415, 'unsupported_media_type');
    await check(SHARED, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'a=b' }, 415, 'unsupported_media_type');
    await check(SHARED, { body: chatBody({ model: NAME, messages: [{ role: 'user', content: 'x'.repeat(5000) }] }) }, 413, 'request_too_large');
  });

  it('optional fields sent as null mean "not set" (as OpenAI accepts them)', async () => {
    const body = chatBody({ model: null, stream: null, max_tokens: null, temperature: null, top_p: null, n: null, seed: null });
    const a = await send(DEDICATED, { chunked, body });
    expect(a.status, a.text).toBe(200);
    expect((JSON.parse(a.text) as { model: string }).model).toBe(NAME);
    // Shared mode still needs a model: null is reported as missing.
    const s = await send(SHARED, { chunked, body: chatBody({ model: null }) });
    expect(s.status).toBe(400);
    expect(errorOf(s)).toMatchObject({ code: 'invalid_request', param: 'model' });
  });
});

describe('methods on the chat routes', () => {
  it('GET/PUT/DELETE answer 405 with allow, HEAD answers 405 without a body, OPTIONS answers the preflight', async () => {
    for (const path of [SHARED, DEDICATED, `${SHARED}/`]) {
      for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
        const a = await send(path, { method, key: null, headers: { 'x-request-id': 'm-1' } });
        expect(a.status, `${method} ${path}`).toBe(405);
        expect(a.headers['allow']).toContain('POST');
        expect(errorOf(a).code).toBe('method_not_allowed');
        expect(a.headers['x-request-id']).toBe('m-1');
      }
      const head = await send(path, { method: 'HEAD', key: null });
      expect(head.status, `HEAD ${path}`).toBe(405);
      expect(head.headers['allow']).toContain('POST');
      expect(head.text).toBe('');
      const opt = await send(path, { method: 'OPTIONS', key: null, headers: { origin: 'https://x.example', 'access-control-request-method': 'POST' } });
      expect(opt.status, `OPTIONS ${path}`).toBe(204);
      expect(opt.headers['access-control-allow-methods']).toContain('POST');
    }
  });
});

describe('errors raised before routing', () => {
  it("a malformed or over-long URL gets the OpenAI body and the request id, not Fastify's default", async () => {
    for (const [path, status] of [
      [`${SHARED}%`, 400],
      ['/funccall/acme/endpoints/%E0%A4%A/v1/chat/completions', 400],
      [`/funccall/acme/endpoints/${'x'.repeat(150)}/v1/chat/completions`, 404],
    ] as const) {
      const a = await send(path, { body: chatBody({ model: NAME }), headers: { 'x-request-id': 'bad-url-1' } });
      expect(a.status, path).toBe(status);
      const e = errorOf(a);
      expect(e.code).toBe(status === 400 ? 'invalid_request' : 'not_found');
      expect(a.text).not.toContain('FST_ERR');
      expect(a.headers['x-request-id']).toBe('bad-url-1');
    }
  });
});

describe('metering', () => {
  const recordsFor = (id: string): UsageRecord[] => sink.records.filter((r) => r.requestId === id || r.requestId.startsWith(`${id}.`));

  it('a caller reusing one x-request-id is billed for every request (the ingest dedupes on the record id)', async () => {
    for (const chunked of [false, true, false]) {
      const a = await send(SHARED, { chunked, body: chatBody({ model: NAME }), headers: { 'x-request-id': 'reused-id' } });
      expect(a.status).toBe(200);
      expect(a.headers['x-request-id']).toBe('reused-id'); // still echoed as sent
    }
    await waitFor(() => recordsFor('reused-id').length === 3);
    const ids = new Set(recordsFor('reused-id').map((r) => r.requestId));
    expect(ids.size).toBe(3);
    for (const id of ids) expect(id.length).toBeLessThanOrEqual(128);
    // A long caller id still yields a record id within the usage schema's 128 characters.
    const long = 'L'.repeat(128);
    expect((await send(SHARED, { body: chatBody({ model: NAME }), headers: { 'x-request-id': long } })).status).toBe(200);
    await waitFor(() => sink.records.some((r) => r.requestId.startsWith('L'.repeat(90))));
    expect(sink.records.find((r) => r.requestId.startsWith('L'.repeat(90)))!.requestId.length).toBeLessThanOrEqual(128);
  });

  it("a caller's reused x-request-id reaches the runtime unique per request (vLLM refuses an id already running)", async () => {
    // Two tenants' requests under one id at once, on the shared replica: each gets its own runtime id and completion id.
    const [a, b] = await Promise.all(
      [SECRET_A, SECRET_B].map((key) =>
        send(SHARED, { key, body: chatBody({ model: NAME, stream: true, max_tokens: 8 }), headers: { 'x-request-id': 'same-id' } }),
      ),
    );
    for (const r of [a!, b!]) {
      expect(r.status).toBe(200);
      expect(r.headers['x-request-id']).toBe('same-id'); // echoed as sent
    }
    const runtimeIds = world.sim.sim
      .stats()
      .requests.map((e) => e.id)
      .filter((id) => id.startsWith('chatcmpl-same-id'));
    expect(runtimeIds).toHaveLength(2);
    expect(new Set(runtimeIds).size).toBe(2);
    const completionId = (text: string): string =>
      (
        JSON.parse(
          text
            .split('\n')
            .find((l) => l.startsWith('data: {'))!
            .slice(6),
        ) as { id: string }
      ).id;
    expect(completionId(a!.text)).not.toBe(completionId(b!.text));
  });

  it('generated request ids are the record ids (one record per request, on both paths)', async () => {
    const before = sink.records.length;
    const a = await send(DEDICATED, { body: chatBody({ stream: true }) });
    const b = await send(DEDICATED, { chunked: true, body: chatBody({ stream: 'true' }) });
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    await waitFor(() => sink.records.length >= before + 2);
    for (const x of [a, b]) {
      const id = x.headers['x-request-id'] as string;
      const recs = sink.records.filter((r) => r.requestId === id);
      expect(recs).toHaveLength(1);
      expect(recs[0]).toMatchObject({ mode: 'dedicated', deploymentId: 'd-a', status: 200, estimated: false });
      expect(recs[0]!.completionTokens).toBeGreaterThan(0);
    }
  });
});

describe('metering around retries and limits', () => {
  it('a reset before any answer is retried on another replica and billed once', async () => {
    // A replica that takes the request and drops the connection without answering.
    const dropper = createServer((req) => req.socket.destroy());
    dropper.listen(0, '127.0.0.1');
    await once(dropper, 'listening');
    const dropUrl = `http://127.0.0.1:${(dropper.address() as AddressInfo).port}`;
    const snap: ConfigSnapshot = makeSnapshot({ sim: world.sim.url, faulty: world.sim.url, dead: dropUrl });
    snap.endpoints.find((e) => e.name === NAME)!.upstreams = [
      { id: 'drop', url: dropUrl, kind: 'sim', servedModel: 'sim-llama', apiKey: null },
      { id: 'ok', url: world.sim.url, kind: 'sim', servedModel: 'sim-llama', apiKey: null },
    ];
    const local = memorySink();
    const node = await startDataplane(snap, local, { ejection: { failures: 1000 } });
    try {
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${node.url}${SHARED}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}` },
          body: JSON.stringify(chatBody({ model: NAME, stream: i % 2 === 1 })),
        });
        expect(res.status).toBe(200);
        await res.text();
        const id = res.headers.get('x-request-id')!;
        const recs = local.records.filter((r) => r.requestId === id);
        expect(recs).toHaveLength(1);
        expect(recs[0]).toMatchObject({ status: 200, estimated: false });
      }
      expect(local.records).toHaveLength(4);
    } finally {
      await node.app.close();
      dropper.close();
    }
  });

  it('a request refused with 429 writes no usage record; the admitted ones write one each', async () => {
    const snap = makeSnapshot({ sim: world.sim.url, faulty: world.sim.url, dead: world.sim.url });
    snap.keys.find((k) => k.id === 'k-a')!.rpmLimit = 2;
    const local = memorySink();
    const node = await startDataplane(snap, local);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${node.url}${SHARED}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}`, 'x-request-id': `rl-${i}` },
          body: JSON.stringify(chatBody({ model: NAME })),
        });
        statuses.push(res.status);
        expect(res.headers.get('x-request-id')).toBe(`rl-${i}`);
        await res.text();
      }
      expect(statuses).toEqual([200, 200, 429]);
      expect(local.records.map((r) => r.requestId.split('.')[0])).toEqual(['rl-0', 'rl-1']);
    } finally {
      await node.app.close();
    }
  });
});

describe('number fields sent as strings', () => {
  it('a long run of digits then a letter is refused at once (the pattern once tried every split of the run)', () => {
    // 60,000 digits took seconds (hours at the 1 MiB body limit) before the pattern matched each digit one way.
    for (const field of ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty']) {
      const r = chatRequestSchema.safeParse({ ...chatBody({ model: NAME }), [field]: `${'1'.repeat(60_000)}x` });
      expect(r.success).toBe(false);
      expect(r.error?.issues[0]?.path).toEqual([field]);
    }
    for (const [value, ok] of [
      ['1', true],
      ['1.', true],
      ['.5', true],
      ['0.5e0', true],
      ['-0', true],
      ['1.2.3', false],
      ['1e', false],
      ['.', false],
    ] as const) {
      expect(chatRequestSchema.safeParse({ ...chatBody({ model: NAME }), top_p: value }).success, value).toBe(ok);
    }
  });
});

describe('a runtime that answers without end', () => {
  it('an SSE event or a JSON answer past its bound is cut with upstream_error, not held in memory', async () => {
    // A runtime (a tenant's external one, say) that streams one line that never ends, or a JSON body that never ends.
    const endless = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (req.method !== 'POST') return void res.end('{}'); // health probes
        const stream = (JSON.parse(body) as { stream?: boolean }).stream === true;
        res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
        // A stream starts with one whole event (the client has its first token), then a line that never ends.
        res.write(
          stream
            ? 'data: {"id":"x","model":"sim-llama","choices":[{"delta":{"content":"Hi"}}]}\n\ndata: {"id":"x","model":"sim-llama","choices":[{"delta":{"content":"'
            : '{"id":"x","choices":[{"message":{"content":"',
        );
        const piece = Buffer.alloc(64 * 1024, 'y');
        const more = (): void => {
          while (!res.destroyed && res.write(piece));
          if (!res.destroyed) res.once('drain', more);
        };
        res.on('close', () => res.destroy());
        more();
      });
    });
    endless.listen(0, '127.0.0.1');
    await once(endless, 'listening');
    const url = `http://127.0.0.1:${(endless.address() as AddressInfo).port}`;
    const snap: ConfigSnapshot = makeSnapshot({ sim: world.sim.url, faulty: world.sim.url, dead: url });
    snap.endpoints.find((e) => e.name === NAME)!.upstreams = [{ id: 'endless', url, kind: 'sim', servedModel: 'sim-llama', apiKey: null }];
    const node = await startDataplane(snap, memorySink());
    try {
      const ask = (stream: boolean) =>
        fetch(`${node.url}${SHARED}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}` },
          body: JSON.stringify(chatBody({ model: NAME, stream })),
        });
      const json = await ask(false);
      expect(json.status).toBe(502);
      expect(((await json.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: 'upstream_error',
        message: expect.stringMatching(/an answer over 64 MiB: the answer is cut/),
      });
      const sse = await ask(true);
      expect(sse.status).toBe(200);
      const text = await sse.text();
      // The first event, then nothing of the endless line: the error event and the end.
      expect(text).toMatch(/^data: \{"id":"x","model":"[^"]+","choices":\[\{"delta":\{"content":"Hi"\}\}\]\}\n\n/);
      expect(text.length).toBeLessThan(1024);
      expect(text).toMatch(/"code":"upstream_error"/);
      expect(text).toMatch(/an event over 4 MiB/);
      expect(text.trimEnd().endsWith('data: [DONE]'), text).toBe(true);
    } finally {
      await node.app.close();
      endless.close();
      endless.closeAllConnections();
    }
  }, 60_000);
});
