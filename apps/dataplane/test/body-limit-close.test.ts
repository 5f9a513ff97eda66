import { once } from 'node:events';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, makeSnapshot, memorySink, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

let sim: StartedSim;
const apps: StartedApp[] = [];

beforeAll(async () => {
  sim = await startSim();
});
afterAll(async () => {
  for (const a of apps) await a.app.close();
  await sim.sim.close();
});

/** Sends a head and then `bodyBytes` bytes as fast as the socket takes them (as Python's http.client does), then reads all. */
function sendRaw(url: string, head: string, bodyBytes: number, waitForContinue = false): Promise<{ text: string; error: string | null }> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(u.port), u.hostname);
    let text = '';
    let error: string | null = null;
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      text += d;
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      error ??= e.code ?? e.message;
    });
    s.on('close', () => resolve({ text, error }));
    s.on('connect', () => {
      s.write(head);
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let left = bodyBytes;
      const pump = (): void => {
        while (left > 0) {
          const n = Math.min(left, chunk.length);
          left -= n;
          if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
            s.once('drain', pump);
            return;
          }
        }
        s.end();
      };
      if (waitForContinue) setTimeout(pump, 200);
      else pump();
    });
  });
}

describe.each([true, false])('a body over the limit (front %s)', (front) => {
  let dp: StartedApp;
  const sink = memorySink();
  beforeAll(async () => {
    dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: sim.url }), sink, { bodyLimit: 4096, front });
    apps.push(dp);
  });

  it.each([64 * 1024, 8 * 1024 * 1024])('%i bytes: the client that writes it all reads a 413, not a reset', async (size) => {
    const head =
      `POST /endpoints/v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${SECRET_A}\r\n` +
      `content-type: application/json\r\ncontent-length: ${size}\r\n\r\n`;
    for (let i = 0; i < 3; i++) {
      const r = await sendRaw(dp.url, head, size);
      expect(r.text).toMatch(/^HTTP\/1\.1 413 /);
      expect(r.text).toContain('"code":"request_too_large"');
      expect(r.error).toBeNull();
    }
    // The node still serves.
    const ok = await fetch(`${dp.url}/endpoints/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SECRET_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: NAME, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    expect(ok.status).toBe(200);
    await ok.text();
  });

  /** Writes `bytes` on one new connection at once and reads until the node closes it. */
  async function pipeline(bytes: string): Promise<string> {
    const u = new URL(dp.url);
    const s = connect(Number(u.port), u.hostname);
    let text = '';
    s.setEncoding('latin1');
    s.on('error', () => {});
    await once(s, 'connect');
    const done = new Promise<void>((resolve) => {
      s.on('data', (d: string) => (text += d));
      s.on('close', () => resolve());
    });
    s.write(bytes);
    await done;
    s.destroy();
    return text;
  }
  const chatHead = (len: number, key = SECRET_A, extra = ''): string =>
    `POST /endpoints/v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\n${extra}content-length: ${len}\r\n\r\n`;
  const chat = JSON.stringify({ model: NAME, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

  it.each([
    ['a body over the limit (413)', chatHead(8000) + 'a'.repeat(8000), 413],
    ['malformed JSON (400, which also closes the connection)', chatHead(9) + '{"model":', 400],
  ])('requests pipelined behind %s on the same connection are neither forwarded nor billed', async (_, first, status) => {
    const records = sink.records.length;
    const forwarded = sim.sim.stats().totals.requests;
    const text = await pipeline(first + (chatHead(Buffer.byteLength(chat)) + chat).repeat(3));
    expect(text).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(text.toLowerCase()).toContain('connection: close');
    expect(text.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    // A request on a new connection after it: forwarded and billed once; had the pipelined ones been served, they
    // were dispatched before it (the same path, earlier), so the runtime would have counted them by now.
    const ok = await fetch(`${dp.url}/endpoints/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SECRET_A}`, 'content-type': 'application/json' },
      body: chat,
    });
    expect(ok.status).toBe(200);
    await ok.text();
    await waitFor(() => sink.records.length > records);
    expect(sim.sim.stats().totals.requests - forwarded).toBe(1);
    expect(sink.records.length - records).toBe(1);
  });

  it('requests pipelined behind answers that keep the connection open are all served, in order', async () => {
    const records = sink.records.length;
    const n = Buffer.byteLength(chat);
    const bad = `{"model":"${NAME}"}`;
    // An ordinary answer, an invalid request (no messages), an auth failure, then two more ordinary ones, the
    // last asking the node to close the connection after it.
    const bytes =
      chatHead(n) +
      chat +
      chatHead(bad.length) +
      bad +
      chatHead(n, 'infk_no_such_key_000000000000000000') +
      chat +
      chatHead(n) +
      chat +
      chatHead(n, SECRET_A, 'connection: close\r\n') +
      chat;
    const text = await pipeline(bytes);
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '400', '401', '200', '200']);
    await waitFor(() => sink.records.length >= records + 3);
  });

  it('Expect: 100-continue over the limit: a 413 and no 100 Continue', async () => {
    const size = 2 * 1024 * 1024;
    const head =
      `POST /endpoints/v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${SECRET_A}\r\n` +
      `content-type: application/json\r\nexpect: 100-continue\r\ncontent-length: ${size}\r\n\r\n`;
    const r = await sendRaw(dp.url, head, size, true);
    expect(r.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.text).not.toContain('100 Continue');
    expect(r.error).toBeNull();
  });
});

describe('lingering after a 413', () => {
  let stall: StartedApp;
  beforeAll(async () => {
    stall = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: sim.url }), memorySink(), { bodyLimit: 4096 });
    apps.push(stall);
  });

  it('a client that stops sending its body is not waited for forever: the node closes the connection', async () => {
    const u = new URL(stall.url);
    // The node's side of the connection, to see it close (a half-open client would only learn of it by writing).
    const accepted = new Map<number, Socket>();
    const onConnection = (sock: Socket): void => void accepted.set(sock.remotePort ?? 0, sock);
    stall.app.server.on('connection', onConnection);
    // Half-open allowed: the client keeps its side open after the node's FIN, as a stalled uploader would.
    const s = connect({ port: Number(u.port), host: u.hostname, allowHalfOpen: true });
    let text = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => (text += d));
    s.on('error', () => {});
    await once(s, 'connect');
    s.write(
      `POST /endpoints/v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${SECRET_A}\r\n` +
        `content-type: application/json\r\ncontent-length: ${100 * 1024 * 1024}\r\n\r\n`,
    );
    s.write(Buffer.alloc(256 * 1024, 0x61));
    // The answer, then the node's FIN, then (after LINGER_IDLE_MS with nothing more sent) the node's close.
    await once(s, 'end');
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    const server = accepted.get(s.localPort ?? -1);
    stall.app.server.off('connection', onConnection);
    expect(server).toBeDefined();
    if (!server!.destroyed) await once(server!, 'close');
    expect(s.destroyed).toBe(false); // the client never closed: the node did
    s.destroy();
  }, 30_000);
});
