// The runtime's request is spliced from the client's bytes (src/proxy/raw-payload.ts): what the runtime receives must be
// what it received when the parsed body was serialised again.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, SERVED, deadUrl, makeSnapshot, memorySink, post, startDataplane } from './helpers.ts';
import type { StartedApp } from './helpers.ts';

describe('the request a runtime receives', () => {
  let upstream: Server;
  let dp: StartedApp;
  const received: { raw: string; contentType: string | undefined }[] = [];

  beforeAll(async () => {
    // A runtime that keeps what it was sent and answers a minimal chat completion.
    upstream = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (req.method !== 'POST') {
        res.writeHead(404).end(); // metrics scrapes and health probes: nothing to record
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ raw: Buffer.concat(chunks).toString('utf8'), contentType: req.headers['content-type'] });
        const body = JSON.stringify({
          id: 'chatcmpl-raw',
          object: 'chat.completion',
          created: 1,
          model: SERVED,
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
        });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
      });
    });
    upstream.listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    dp = await startDataplane(makeSnapshot({ sim: url, faulty: url, dead: await deadUrl() }), memorySink());
  });
  afterAll(async () => {
    await dp.app.close();
    upstream.close();
  });

  const sendRaw = async (text: string, headers: Record<string, string> = {}): Promise<{ raw: string; contentType: string | undefined }> => {
    const before = received.length;
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, text, undefined, headers);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { model: string }).model).toBe(NAME);
    expect(received.length).toBe(before + 1);
    return received[before]!;
  };

  it('carries the client bytes of a conversation-sized body with only model changed, their spacing too', async () => {
    // Serialising the parsed body again would drop the spaces.
    const long = 'a conversation so far. '.repeat(60);
    const messages = `[ {"role": "user", "content": "Keep \\"model\\": as written, é 東京 ${long}"} ]`;
    const got = await sendRaw(`{ "model": "${NAME}", "messages": ${messages}, "max_tokens": 16, "temperature": 0.7 }`);
    expect(got.raw).toBe(`{ "model": "${SERVED}", "messages": ${messages}, "max_tokens": 16, "temperature": 0.7 }`);
    expect(got.contentType).toBe('application/json');
  });

  it('serialises a short body again (below SPLICE_MIN_BYTES the splice costs more than it saves)', async () => {
    const got = await sendRaw(`{ "model": "${NAME}", "messages": [ {"role": "user", "content": "hi"} ] }`);
    expect(got.raw).toBe(JSON.stringify({ model: SERVED, messages: [{ role: 'user', content: 'hi' }] }));
  });

  it('sends what serialising the parsed body sends whenever the bytes would differ from it', async () => {
    // Each body is long enough to be spliced (SPLICE_MIN_BYTES) if nothing stopped it.
    const hi = `hi ${'x'.repeat(1100)}`;
    // An integer written as a float: runtimes with strict parsers (TGI, Ollama) refuse 16.0 for an integer field.
    const asFloat = await sendRaw(`{"model":"${NAME}","messages":[{"role":"user","content":"${hi}"}],"max_tokens":16.0}`);
    expect(asFloat.raw).toBe(JSON.stringify({ model: SERVED, messages: [{ role: 'user', content: hi }], max_tokens: 16 }));
    // "model" twice (here a nested one first, with a string value): parsed and serialised.
    const nested = await sendRaw(JSON.stringify({ metadata: { model: 'mine' }, model: NAME, messages: [{ role: 'user', content: hi }] }));
    expect(JSON.parse(nested.raw)).toEqual({ metadata: { model: 'mine' }, model: SERVED, messages: [{ role: 'user', content: hi }] });
    // The top-level model spelled with an escape, a nested "model" written plainly: only the top-level one changes.
    const escaped = await sendRaw(`{"mod\\u0065l":"${NAME}","messages":[{"role":"user","content":"${hi}"}],"metadata":{"model":"mine"}}`);
    expect(JSON.parse(escaped.raw)).toEqual({ model: SERVED, messages: [{ role: 'user', content: hi }], metadata: { model: 'mine' } });
    // A duplicate key: the runtime gets the value the limits saw (the last), once.
    const dup = await sendRaw(`{"model":"${NAME}","messages":[{"role":"user","content":"${hi}"}],"max_tokens":100000,"max_tokens":1}`);
    expect(dup.raw).toBe(JSON.stringify({ model: SERVED, messages: [{ role: 'user', content: hi }], max_tokens: 1 }));
    // Bytes that are not UTF-8: the runtime gets the replacement character the parsed body holds.
    const badUtf8 = Buffer.concat([Buffer.from(`{"model":"${NAME}","messages":[{"role":"user","content":"a`), Buffer.from([0xff]), Buffer.from(`b${hi}"}]}`)]);
    const before = received.length;
    const res = await fetch(`${dp.url}/endpoints/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}` },
      body: new Uint8Array(badUtf8),
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(received[before]!.raw)).toMatchObject({ messages: [{ role: 'user', content: `a\ufffdb${hi}` }] });
  });
});
