// The node's own HTTP/1.1 front (src/front/http1-front.ts) against Node's HTTP server: the same bytes, sent to a node
// with the front and to one without it, must get the same answers, in the same order, on connections that end the
// same way. Smuggling forms, malformed heads, pipelining, hand-overs in the middle of a connection, bytes one at a
// time. Then what only the front does: keep-alive and head timeouts, a graceful close with a stream in flight.
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, chatBody, dataLines, deadUrl, makeSnapshot, memorySink, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

const SHARED = '/endpoints/v1/chat/completions';
const CHAT = JSON.stringify(chatBody({ model: NAME }));
const STREAM = JSON.stringify(chatBody({ model: NAME, stream: true }));
const LEN = Buffer.byteLength(CHAT);
const HEAD = `Host: x\r\nContent-Type: application/json\r\nAuthorization: Bearer ${SECRET_A}\r\n`;
/** A plain chat POST, with `extra` header lines, the body and its Content-Length line as given. */
const post = (extra = '', body = CHAT, cl = `Content-Length: ${Buffer.byteLength(body)}\r\n`): string =>
  `POST ${SHARED} HTTP/1.1\r\n${HEAD}${cl}${extra}\r\n${body}`;
/** The last request of a case that leaves the connection open: its answer closes it. */
const LAST = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** The answers in a connection's bytes (Content-Length or chunked bodies), in order. */
function parseAnswers(bytes: Buffer): Answer[] {
  const s = bytes.toString('latin1');
  const out: Answer[] = [];
  let i = 0;
  while (i < s.length) {
    const end = s.indexOf('\r\n\r\n', i);
    if (end < 0) break;
    const [line = '', ...fields] = s.slice(i, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const f of fields) headers[f.slice(0, f.indexOf(':')).toLowerCase()] = f.slice(f.indexOf(':') + 1).trim();
    i = end + 4;
    let body = '';
    if (headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const eol = s.indexOf('\r\n', i);
        const size = parseInt(s.slice(i, eol), 16);
        i = eol + 2;
        if (!(size > 0)) {
          i += 2;
          break;
        }
        body += s.slice(i, i + size);
        i += size + 2;
      }
    } else {
      const n = Number(headers['content-length'] ?? 0);
      body = s.slice(i, i + n);
      i += n;
    }
    out.push({ status: Number(line.split(' ')[1]), headers, body: Buffer.from(body, 'latin1').toString('utf8') });
  }
  return out;
}

/** Writes `pieces` one after the other on a fresh connection (then half-closes when `end`); every answer until it closes. */
function exchange(url: string, pieces: readonly string[], end = false): Promise<Answer[]> {
  return new Promise((resolve) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    socket.setNoDelay(true);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {}); // a reset after the answers: what was read is what counts
    socket.on('close', () => resolve(parseAnswers(Buffer.concat(chunks))));
    for (const p of pieces) socket.write(Buffer.from(p, 'latin1'));
    if (end) socket.end();
  });
}

/** What must match between the two servers: status, Connection, and the error code or the answer's kind. */
function shape(a: Answer): string {
  let what: string;
  try {
    const parsed = JSON.parse(a.body) as { error?: { code: string | null; param: string | null }; object?: string; status?: string };
    what = parsed.error !== undefined ? `error ${parsed.error.code} ${parsed.error.param}` : (parsed.object ?? parsed.status ?? '?');
  } catch {
    what = a.body.includes('data: [DONE]') ? 'stream' : 'text';
  }
  return `${a.status} ${a.headers['connection'] ?? '-'} ${what}`;
}

let sim: StartedSim;
let withFront: StartedApp;
let withoutFront: StartedApp;

beforeAll(async () => {
  sim = await startSim();
  const snapshot = makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() });
  withFront = await startDataplane(snapshot, memorySink());
  withoutFront = await startDataplane(snapshot, memorySink(), { front: false });
});
afterAll(async () => {
  await withFront?.app.close();
  await withoutFront?.app.close();
  await sim?.sim.close();
});

const bytewise = (s: string): string[] => [...s];

describe('the front answers as Node’s HTTP server does', () => {
  const cases: [string, string[], boolean?][] = [
    ['a plain request, then one that closes', [post() + LAST]],
    ['three pipelined in one write', [post() + post('', STREAM) + post() + LAST]],
    ['one byte per write', bytewise(post() + LAST)],
    ['a stream', [post('', STREAM) + LAST]],
    ['Connection: close ends it after the answer', [post('Connection: close\r\n')]],
    ['a hand-over after a served request (GET in between)', [post() + `GET /endpoints/v1/models HTTP/1.1\r\n${HEAD}\r\n` + post() + LAST]],
    ['a hand-over first, then plain requests', [`GET /endpoints/v1/models HTTP/1.1\r\n${HEAD}\r\n` + post() + LAST]],
    ['Content-Length and Transfer-Encoding', [post('Transfer-Encoding: chunked\r\n') + LAST]],
    [
      'Transfer-Encoding: chunked alone',
      [`POST ${SHARED} HTTP/1.1\r\n${HEAD}Transfer-Encoding: chunked\r\n\r\n${LEN.toString(16)}\r\n${CHAT}\r\n0\r\n\r\n` + LAST],
    ],
    ['two equal Content-Lengths', [post(`Content-Length: ${LEN}\r\n`) + LAST]],
    ['two different Content-Lengths', [post(`Content-Length: ${LEN + 5}\r\n`) + LAST]],
    ['Content-Length with a plus sign', [post('', CHAT, `Content-Length: +${LEN}\r\n`) + LAST]],
    ['Content-Length with a space inside', [post('', CHAT, `Content-Length: ${LEN} 0\r\n`) + LAST]],
    ['Content-Length in hex', [post('', CHAT, `Content-Length: 0x${LEN.toString(16)}\r\n`) + LAST]],
    ['Content-Length with whitespace around it', [post('', CHAT, `Content-Length: \t ${LEN} \t\r\n`) + LAST]],
    ['Content-Length 0', [post('', '', 'Content-Length: 0\r\n') + LAST]],
    ['a space before the colon', [post('', CHAT, `Content-Length : ${LEN}\r\n`) + LAST]],
    ['a folded header line', [post('X-A: 1\r\n  folded\r\n') + LAST]],
    ['bare LF line ends', [post().replace(/\r\n/g, '\n') + LAST]],
    ['a bare CR inside a value', [post('X-A: a\rb\r\n') + LAST]],
    ['NUL in a value', [post('X-A: a\x00b\r\n') + LAST]],
    ['DEL in a value', [post('X-A: a\x7fb\r\n') + LAST]],
    ['a Latin-1 byte and a tab in values', [post('X-A: caf\xe9\r\nX-B: a\tb\r\n') + LAST]],
    ['HTTP/1.0', [post().replace('HTTP/1.1', 'HTTP/1.0')]],
    ['a lower-case method', [post().replace('POST', 'post') + LAST]],
    ['an absolute-form target', [post().replace(`POST ${SHARED}`, `POST http://x${SHARED}`) + LAST]],
    ['two spaces in the request line', [post().replace('POST ', 'POST  ') + LAST]],
    ['Expect: 100-continue', [post('Expect: 100-continue\r\n') + LAST]],
    ['Proxy-Connection: close (llhttp takes it as Connection)', [post('Proxy-Connection: close\r\n') + LAST]],
    ['Connection: Upgrade', [post('Connection: Upgrade\r\nUpgrade: h2c\r\n')], true],
    ['a repeated Authorization', [post('Authorization: Bearer infk_other\r\n') + LAST]],
    ['a header named constructor', [post('constructor: x\r\n') + LAST]],
    ['a 20 KB header', [post(`X-Big: ${'b'.repeat(20_000)}\r\n`) + LAST]],
    ['a body shorter than its Content-Length, then the client ends', [post('', CHAT, `Content-Length: ${LEN + 10}\r\n`)], true],
    ['half a head, then the client ends', [post().slice(0, 40)], true],
    ['a whole request, then the client ends at once', [post()], true],
    ['no key', [post().replace(`Authorization: Bearer ${SECRET_A}\r\n`, '') + LAST]],
    ['a body that is not JSON', [post('', '{"model":') + LAST]],
    ['a wrong content type', [post().replace('application/json', 'text/plain') + LAST]],
    ['no Host', [post().replace('Host: x\r\n', '') + LAST]],
    ['a byte above 0x7f in the target', [post().replace(SHARED, `/funccall/acme/endpoints/${NAME}\xe9/v1/chat/completions`) + LAST]],
    ['a tab in the target', [post().replace(SHARED, `/funccall/acme/endpoints/${NAME}\t/v1/chat/completions`) + LAST]],
    ['a GET with bare LF line ends (answered without waiting for more)', ['GET /healthz HTTP/1.1\nHost: x\n\n']],
  ];
  for (const [label, pieces, end] of cases) {
    it(label, async () => {
      const [front, node] = await Promise.all([exchange(withFront.url, pieces, end), exchange(withoutFront.url, pieces, end)]);
      expect(front.map(shape)).toEqual(node.map(shape));
    });
  }

  it('the cases above do get answers (the comparison is not between two empty lists)', async () => {
    expect((await exchange(withFront.url, [post() + post('', STREAM) + post() + LAST])).map(shape)).toEqual([
      '200 keep-alive chat.completion',
      '200 keep-alive stream',
      '200 keep-alive chat.completion',
      '200 close ok',
    ]);
    const [smuggled] = await exchange(withFront.url, [post('Transfer-Encoding: chunked\r\n') + LAST]);
    expect(smuggled?.status).toBe(400);
  });
});

/** A raw keep-alive connection: write, then read answers as they come. */
class Conn {
  readonly socket: Socket;
  private buf = Buffer.alloc(0);
  closed = false;
  constructor(url: string) {
    this.socket = connect(Number(new URL(url).port), '127.0.0.1');
    this.socket.on('data', (c: Buffer) => (this.buf = Buffer.concat([this.buf, c])));
    this.socket.on('error', () => {});
    this.socket.on('close', () => (this.closed = true));
  }
  answers(): Answer[] {
    return parseAnswers(this.buf);
  }
  text(): string {
    return this.buf.toString('latin1');
  }
}

// Node's parser reads pipelined bytes ahead of the answers: when the bytes after a request are wrong for it, its
// client-error handler answers that error and destroys the connection, and the answer to the request before is lost.
// The front reads one request at a time: it answers the request, and its answer closes the connection.
describe('where the front answers a request Node’s server loses', () => {
  it('bytes after a Connection: close request are not read (nor served); the request is answered and the connection closes', async () => {
    const before = sim.sim.stats().totals.requests;
    const pieces = [post('Connection: close\r\n') + post()];
    // The client keeps its side open: the server must close the connection itself.
    expect((await exchange(withFront.url, pieces)).map(shape)).toEqual(['200 close chat.completion']);
    expect(sim.sim.stats().totals.requests).toBe(before + 1);
    expect((await exchange(withoutFront.url, pieces)).map(shape)).toEqual(['400 close error invalid_request null']);
  });

  it('a client that keeps its side open after a Connection: close answer and sends more is not served again', async () => {
    const before = sim.sim.stats().totals.requests;
    const socket = connect({ port: Number(new URL(withFront.url).port), host: '127.0.0.1', allowHalfOpen: true });
    let text = '';
    let ended = false;
    let closed = false;
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('end', () => (ended = true));
    socket.on('error', () => {});
    socket.on('close', () => (closed = true));
    socket.write(post('Connection: close\r\n'));
    await waitFor(() => ended); // the server's end of the connection, after its answer
    expect(parseAnswers(Buffer.from(text, 'latin1')).map(shape)).toEqual(['200 close chat.completion']);
    socket.write(post());
    // A socket closed at the server answers the bytes with a reset, which the client sees at its next write.
    const poke = setInterval(() => socket.write('\r\n'), 50);
    try {
      await waitFor(() => closed);
    } finally {
      clearInterval(poke);
    }
    expect(sim.sim.stats().totals.requests).toBe(before + 1);
  });

  it('a body longer than its Content-Length: the request (cut at its length) gets its 400 and the connection closes', async () => {
    const pieces = [post('', CHAT, `Content-Length: ${LEN - 3}\r\n`) + LAST];
    expect((await exchange(withFront.url, pieces)).map(shape)).toEqual(['400 close error invalid_json null']);
    expect((await exchange(withoutFront.url, pieces)).map(shape)).toEqual(['400 close error invalid_request null']);
  });
});

describe('connections the front holds', () => {
  it('a caller without a valid key is refused before its body is read: the node holds none of a megabyte it was promised', async () => {
    for (const auth of ['', 'Authorization: Bearer infk_not_a_key\r\n']) {
      for (const url of [withFront.url, withoutFront.url]) {
        const c = new Conn(url);
        // The head promises a megabyte; ten bytes of it come, and the client waits for an answer.
        c.socket.write(`POST ${SHARED} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${auth}Content-Length: 1000000\r\n\r\n{"model":"`);
        await waitFor(() => c.answers().length === 1, 5_000);
        expect(c.answers()[0]!.status, `${url} ${auth}`).toBe(401);
        c.socket.destroy();
      }
    }
  });

  it('keeps a plain client’s connection through its requests, and gives a GET’s to Node’s server', async () => {
    const before = withFront.app.frontConnections();
    const c = new Conn(withFront.url);
    c.socket.write(post());
    await waitFor(() => c.answers().length === 1);
    expect(withFront.app.frontConnections()).toBe(before + 1);
    const a = c.answers()[0]!;
    expect(a.status).toBe(200);
    expect(a.headers['connection']).toBe('keep-alive');
    expect(a.headers['keep-alive']).toBe('timeout=72');
    expect(a.headers['date']).toMatch(/GMT$/);
    expect(a.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    c.socket.write(post('', STREAM));
    await waitFor(() => c.answers().length === 2);
    const s = c.answers()[1]!;
    expect(s.headers['transfer-encoding']).toBe('chunked');
    expect(s.headers['content-type']).toContain('text/event-stream');
    expect(dataLines(s.body).at(-1)).toBe('[DONE]');
    // A request the front does not take: the connection is Node's from then on, and still answers.
    c.socket.write(`GET /endpoints/v1/models HTTP/1.1\r\n${HEAD}\r\n`);
    await waitFor(() => c.answers().length === 3);
    expect(c.answers()[2]!.status).toBe(200);
    expect(withFront.app.frontConnections()).toBe(before);
    const metrics = await fetch(withFront.metricsUrl).then((r) => r.text());
    expect(metrics).toMatch(/^dataplane_front_connections \d+$/m);
    expect(Number(/^dataplane_front_handovers_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
    c.socket.write(post());
    await waitFor(() => c.answers().length === 4);
    expect(c.answers()[3]!.status).toBe(200);
    c.socket.destroy();
  });

  it('a node without the front says nothing of it in its metrics', async () => {
    expect(await fetch(withoutFront.metricsUrl).then((r) => r.text())).not.toContain('dataplane_front_');
  });

  it('a client that leaves mid-stream frees its connection', async () => {
    const before = withFront.app.frontConnections();
    const c = new Conn(withFront.url);
    c.socket.write(post('', JSON.stringify(chatBody({ model: NAME, stream: true, max_tokens: 4000 }))));
    await waitFor(() => c.text().includes('data: '));
    c.socket.destroy();
    await waitFor(() => withFront.app.frontConnections() === before);
  });
});

describe('timeouts and closing', () => {
  let slowSim: StartedSim;
  let node: StartedApp;
  beforeAll(async () => {
    slowSim = await startSim({ itlMs: 20 });
    node = await startDataplane(makeSnapshot({ sim: slowSim.url, faulty: slowSim.url, dead: await deadUrl() }), memorySink());
  });
  afterAll(async () => {
    await node?.app.close();
    await slowSim?.sim.close();
  });

  it('closes a connection idle past the keep-alive timeout, and says the timeout in Keep-Alive', async () => {
    node.app.server.keepAliveTimeout = 1500;
    try {
      const c = new Conn(node.url);
      c.socket.write(post());
      await waitFor(() => c.answers().length === 1);
      expect(c.answers()[0]!.headers['keep-alive']).toBe('timeout=1');
      expect(c.closed).toBe(false);
      await waitFor(() => c.closed, 10_000);
    } finally {
      node.app.server.keepAliveTimeout = 72_000;
    }
  });

  it('answers 408 to a head that does not finish within headersTimeout', async () => {
    node.app.server.headersTimeout = 1500;
    try {
      const c = new Conn(node.url);
      c.socket.write(post());
      await waitFor(() => c.answers().length === 1);
      c.socket.write(post().slice(0, 30)); // a second request that never finishes its head
      await waitFor(() => c.closed, 10_000);
      expect(c.answers().map((a) => a.status)).toEqual([200, 408]);
    } finally {
      node.app.server.headersTimeout = 75_000;
    }
  });

  it('on close: an idle connection ends at once, a stream in flight finishes and then its connection closes', async () => {
    const idle = new Conn(node.url);
    idle.socket.write(post());
    await waitFor(() => idle.answers().length === 1);
    const busy = new Conn(node.url);
    busy.socket.write(post('', JSON.stringify(chatBody({ model: NAME, stream: true, max_tokens: 40 }))));
    await waitFor(() => busy.text().includes('data: '));
    const closing = node.app.close();
    await waitFor(() => idle.closed);
    expect(busy.closed).toBe(false);
    await closing;
    await waitFor(() => busy.closed);
    const [answer] = busy.answers();
    expect(answer?.status).toBe(200);
    expect(dataLines(answer!.body).at(-1)).toBe('[DONE]');
  });
});
