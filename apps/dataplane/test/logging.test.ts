import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggerOptions } from '../src/logging.ts';
import { NAME, SECRET_A, chatBody, deadUrl, makeSnapshot, memorySink, post, sendRequest, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

const PROMPT = 'my-private-prompt-text-4711';
const BOGUS_KEY = 'infk_bogus_key_never_in_logs_12345';

let sim: StartedSim;
let dead: string;
beforeAll(async () => {
  sim = await startSim();
  dead = await deadUrl();
});
afterAll(async () => {
  await sim.sim.close();
});

async function withLogs(level: string, run: (dp: StartedApp) => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
      cb();
    },
  });
  const logger = pino(loggerOptions(level), sink);
  const dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead }), memorySink(), { loggerInstance: logger });
  try {
    await run(dp);
  } finally {
    await dp.app.close();
  }
  return lines;
}

const traffic = async (dp: StartedApp): Promise<void> => {
  const chat = `${dp.url}/endpoints/v1/chat/completions`;
  const messages = [{ role: 'user', content: PROMPT }];
  await (await post(chat, chatBody({ model: NAME, messages }), SECRET_A, { 'x-request-id': 'log-json' })).text();
  await (await post(chat, chatBody({ model: NAME, messages, stream: true }), SECRET_A, { 'x-request-id': 'log-stream' })).text();
  await (await post(chat, chatBody({ model: 'dead-model', messages }), SECRET_A, { 'x-request-id': 'log-dead' })).text();
  await (await post(chat, chatBody({ model: NAME, messages }), BOGUS_KEY, { 'x-request-id': 'log-401' })).text();
  await (await post(chat, `{"model":"${NAME}","messages":"${PROMPT}"`, SECRET_A, { 'x-request-id': 'log-400' })).text();
  // Through Fastify's routes rather than the fast path: a chunked body, another route, a 405.
  await sendRequest(dp.url, '/endpoints/v1/chat/completions', {
    body: chatBody({ model: NAME, messages }),
    chunked: true,
    headers: { 'x-request-id': 'log-chunked' },
  });
  await sendRequest(dp.url, '/endpoints/v1/models', { method: 'GET', headers: { 'x-request-id': 'log-models' } });
  await sendRequest(dp.url, '/endpoints/v1/chat/completions', { method: 'DELETE', headers: { 'x-request-id': 'log-405' } });
};

/** How many times a raw JSON line holds the key (JSON.parse keeps the last of repeated keys, hiding the repeat). */
const keyCount = (line: string, key: string): number => line.split(`"${key}":`).length - 1;

describe('structured logs', () => {
  it('at info: one line per request with its id, and no key, token or prompt text', async () => {
    const lines = await withLogs('info', traffic);
    const all = lines.join('\n');
    for (const id of ['log-json', 'log-stream', 'log-dead', 'log-401', 'log-400', 'log-chunked', 'log-models', 'log-405']) {
      const mine = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['reqId'] === id && l['msg'] === 'request');
      expect(mine, id).toHaveLength(1);
    }
    const stream = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l['reqId'] === 'log-stream' && l['msg'] === 'request')!;
    expect(stream).toMatchObject({ status: 200, route: 'chat', mode: 'shared', endpoint: NAME });
    // Each request line names its request once, whichever way the request came in (was twice on Fastify's routes).
    for (const line of lines) expect(keyCount(line, 'reqId'), line).toBe(line.includes('"msg":"request"') ? 1 : 0);
    expect(all).not.toContain(SECRET_A);
    expect(all).not.toContain(BOGUS_KEY);
    expect(all).not.toContain(PROMPT);
    expect(all.toLowerCase()).not.toContain('bearer');
  });

  it('at the default warn level the request path writes nothing', async () => {
    const lines = await withLogs('warn', async (dp) => {
      const chat = `${dp.url}/endpoints/v1/chat/completions`;
      await (await post(chat, chatBody({ model: NAME }))).text();
      await (await post(chat, chatBody({ model: NAME, stream: true }))).text();
    });
    expect(lines).toEqual([]);
  });

  it('a stream cut after bytes reached the client is one warning with the request id', async () => {
    sim.sim.setFaults({ cutAfterTokens: 2 });
    try {
      const lines = await withLogs('warn', async (dp) => {
        const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME, stream: true }), SECRET_A, { 'x-request-id': 'log-cut' });
        expect(res.status).toBe(200);
        await res.text();
      });
      const cut = lines.filter((l) => (JSON.parse(l) as { msg: string }).msg === 'upstream stream failed mid-response');
      expect(cut).toHaveLength(1);
      expect(keyCount(cut[0]!, 'reqId')).toBe(1);
      expect(JSON.parse(cut[0]!)).toMatchObject({ level: 40, reqId: 'log-cut' });
    } finally {
      sim.sim.setFaults({});
    }
  });

  it('redacts the authorization header if a header object is ever logged', () => {
    const out: string[] = [];
    const logger = pino(
      loggerOptions('info'),
      new Writable({
        write: (c: Buffer, _e, cb) => {
          out.push(c.toString());
          cb();
        },
      }),
    );
    logger.info({ req: { headers: { authorization: `Bearer ${SECRET_A}`, cookie: 'a=b' } } }, 'x');
    expect(out.join('')).not.toContain(SECRET_A);
    expect(out.join('')).toContain('[redacted]');
  });
});
