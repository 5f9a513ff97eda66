// Requests that are wrong at the HTTP level or in ways a parser hides: Node's parser refusals, prototype keys,
// Content-Encoding, wrong methods, stream_options without stream. Each chat case runs on the fast path
// (Content-Length) and on Fastify's route (chunked).
import { request } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, deadUrl, makeSnapshot, memorySink, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

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

const SHARED = '/endpoints/v1/chat/completions';
const DEDICATED = `/funccall/acme/endpoints/${NAME}/v1/chat/completions`;
interface OpenAIError {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

const errorOf = (a: { text: string }): OpenAIError => (JSON.parse(a.text) as { error: OpenAIError }).error;

interface SendOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  readonly chunked?: boolean;
}

/** One request over a real socket; a chunked body goes in two writes (the fast path leaves it to Fastify). */
function send(path: string, o: SendOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}`, ...o.headers };
  const body = typeof o.body === 'string' ? Buffer.from(o.body) : o.body;
  if (body !== undefined && o.chunked !== true) headers['content-length'] = String(Buffer.byteLength(body));
  return new Promise((resolve, reject) => {
    const req = request(`${dp.url}${path}`, { method: o.method ?? 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined && o.chunked === true) {
      const half = Math.floor(body.length / 2);
      req.write(body.subarray(0, half));
      req.end(body.subarray(half));
    } else req.end(body);
  });
}

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
