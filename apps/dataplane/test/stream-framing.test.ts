import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, dataLines, deadUrl, makeSnapshot, memorySink, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

// The node writes each SSE chunk of a streamed answer straight to the client's socket, framed by itself
// (upstream-attempt.ts `directSocket`, `chunkOf`), and pauses the runtime when that socket is full. These tests read
// the client's side byte for byte over a raw socket: the framing, the connection's next request, HTTP/1.0 (no
// chunked framing: Node's own writes) and backpressure all the way to the runtime.

let sim: StartedSim;
let dp: StartedApp;

beforeAll(async () => {
  // A token every 2 ms: the chunks come in separate reads, so each is written on its own.
  sim = await startSim({ itlMs: 2 });
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), memorySink());
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

const requestText = (path: string, body: string, version = '1.1', extra = ''): string =>
  `POST ${path} HTTP/${version}\r\nhost: test\r\nauthorization: Bearer ${SECRET_A}\r\ncontent-type: application/json\r\n` +
  `content-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

/** A raw client socket and every byte it has read. */
async function rawClient(url: string): Promise<{ socket: Socket; bytes: () => Buffer; closed: () => boolean }> {
  const { port } = new URL(url);
  const socket = connect(Number(port), '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const parts: Buffer[] = [];
  let closed = false;
  socket.on('data', (b: Buffer) => parts.push(b));
  socket.on('close', () => (closed = true));
  return { socket, bytes: () => Buffer.concat(parts), closed: () => closed };
}

interface Chunked {
  readonly head: string;
  readonly chunks: Buffer[];
  /** Bytes after the response's last chunk and its blank line. */
  readonly rest: Buffer;
}

/** Parses one chunked response strictly off `buf`; null while it is not whole yet. Throws on any framing error. */
function parseChunked(buf: Buffer): Chunked | null {
  const headEnd = buf.indexOf('\r\n\r\n');
  if (headEnd < 0) return null;
  const head = buf.toString('latin1', 0, headEnd);
  let at = headEnd + 4;
  const chunks: Buffer[] = [];
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol < 0) return null;
    const sizeText = buf.toString('latin1', at, eol);
    if (!/^[0-9a-f]+$/.test(sizeText)) throw new Error(`bad chunk size line ${JSON.stringify(sizeText)}`);
    const size = parseInt(sizeText, 16);
    at = eol + 2;
    if (size === 0) {
      if (buf.length < at + 2) return null;
      if (buf.toString('latin1', at, at + 2) !== '\r\n') throw new Error('no blank line after the last chunk');
      return { head, chunks, rest: buf.subarray(at + 2) };
    }
    if (buf.length < at + size + 2) return null;
    chunks.push(buf.subarray(at, at + size));
    if (buf.toString('latin1', at + size, at + size + 2) !== '\r\n') throw new Error('chunk not followed by CRLF');
    at += size + 2;
  }
}

/** A runtime that streams `total` numbered events as fast as its socket takes them, and no faster; what it did so far. */
interface FloodRuntime {
  readonly server: Server;
  /** Its write returned false and it waits for 'drain'. */
  readonly waiting: () => boolean;
  readonly written: () => number;
  /** When it last wrote an event (Date.now()). */
  readonly lastWrite: () => number;
}

async function floodRuntime(total: number): Promise<FloodRuntime> {
  let waiting = false;
  let written = 0;
  let lastWrite = 0;
  const server = createServer((req, res: ServerResponse) => {
    req.resume();
    // Health probes and metrics scrapes get a plain answer; only the chat request streams.
    if (req.method !== 'POST') return void res.end('{}');
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const pad = 'x'.repeat(200);
    const more = (): void => {
      while (written < total) {
        const ok = res.write(
          `data: {"object":"chat.completion.chunk","model":"sim-llama","choices":[{"index":0,"delta":{"content":"${written} ${pad}"}}]}\n\n`,
        );
        written++;
        lastWrite = Date.now();
        if (!ok) {
          waiting = true;
          res.once('drain', () => {
            waiting = false;
            more();
          });
          return;
        }
      }
      res.end('data: [DONE]\n\n');
    };
    more();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, waiting: () => waiting, written: () => written, lastWrite: () => lastWrite };
}

const urlOf = (s: Server): string => `http://127.0.0.1:${(s.address() as AddressInfo).port}`;

describe('stream chunks written straight to the client socket', () => {
  it('frames every chunk exactly (one head, sizes that match, the last chunk), and the connection serves the next request', async () => {
    const client = await rawClient(dp.url);
    try {
      const body = JSON.stringify({ model: NAME, stream: true, max_tokens: 24, messages: [{ role: 'user', content: 'count' }] });
      client.socket.write(requestText('/endpoints/v1/chat/completions', body));
      await waitFor(() => parseChunked(client.bytes()) !== null);
      const first = parseChunked(client.bytes())!;
      expect(first.head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(first.head.toLowerCase()).toContain('\r\ntransfer-encoding: chunked');
      expect(first.head.toLowerCase()).toContain('\r\ncontent-type: text/event-stream');
      expect(first.head.match(/HTTP\/1\.1/g)).toHaveLength(1);
      // Tokens came one read at a time, so most chunks went out on their own.
      expect(first.chunks.length).toBeGreaterThan(10);
      const data = dataLines(Buffer.concat(first.chunks).toString('utf8'));
      expect(data.at(-1)).toBe('[DONE]');
      const parsed = data.slice(0, -1).map((d) => JSON.parse(d) as { model: string; choices: { delta: { content?: string } }[] });
      expect(parsed.every((c) => c.model === NAME)).toBe(true);
      expect(parsed.filter((c) => (c.choices[0]?.delta.content ?? '') !== '').length).toBe(24);
      expect(first.rest.length).toBe(0);

      // The same connection, a JSON request: Node's HTTP server still knows where the last response ended.
      const json = JSON.stringify({ model: NAME, max_tokens: 3, messages: [{ role: 'user', content: 'again' }] });
      const before = client.bytes().length;
      client.socket.write(requestText('/endpoints/v1/chat/completions', json));
      await waitFor(() => {
        const b = client.bytes().subarray(before);
        const end = b.indexOf('\r\n\r\n');
        if (end < 0) return false;
        const length = /\r\ncontent-length: (\d+)/i.exec(b.toString('latin1', 0, end));
        return length !== null && b.length >= end + 4 + Number(length[1]);
      });
      const second = client.bytes().subarray(before).toString('utf8');
      expect(second).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      const answer = JSON.parse(second.slice(second.indexOf('\r\n\r\n') + 4)) as { model: string; usage: { completion_tokens: number } };
      expect(answer.model).toBe(NAME);
      expect(answer.usage.completion_tokens).toBe(3);
      expect(client.closed()).toBe(false);
    } finally {
      client.socket.destroy();
    }
  });

  it('an HTTP/1.0 client gets the stream unframed, delimited by the close (no chunked encoding to write into)', async () => {
    const client = await rawClient(dp.url);
    try {
      const body = JSON.stringify({ model: NAME, stream: true, max_tokens: 12, messages: [{ role: 'user', content: 'old client' }] });
      client.socket.write(requestText('/endpoints/v1/chat/completions', body, '1.0'));
      await waitFor(() => client.closed());
      const text = client.bytes().toString('utf8');
      const headEnd = text.indexOf('\r\n\r\n');
      const head = text.slice(0, headEnd).toLowerCase();
      expect(head).toMatch(/^http\/1\.1 200 ok\r\n/);
      expect(head).not.toContain('transfer-encoding');
      const data = dataLines(text.slice(headEnd + 4));
      expect(data.at(-1)).toBe('[DONE]');
      expect(data.slice(0, -1).every((d) => (JSON.parse(d) as { model: string }).model === NAME)).toBe(true);
      // No chunk-size lines in the body.
      expect(
        text
          .slice(headEnd + 4)
          .split('\n')
          .every((l) => l === '' || l.startsWith('data: ')),
      ).toBe(true);
    } finally {
      client.socket.destroy();
    }
  });

  describe('a pipelined stream that met backpressure while queued, then on the socket', () => {
    const total = 60_000;
    let slow: Server;
    let fast: FloodRuntime;
    let local: StartedApp;
    /** When the first stream's runtime ended it (Date.now()). */
    let slowDoneAt = 0;

    beforeAll(async () => {
      // Ahead in the pipeline: a stream of 40 events 50 ms apart (the model the snapshot calls faulty).
      slow = createServer((req, res) => {
        req.resume();
        if (req.method !== 'POST') return void res.end('{}');
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let i = 0;
        const tick = setInterval(() => {
          res.write(`data: {"object":"chat.completion.chunk","model":"sim-llama","choices":[{"index":0,"delta":{"content":"s${i}"}}]}\n\n`);
          if (++i === 40) {
            clearInterval(tick);
            res.end('data: [DONE]\n\n');
            slowDoneAt = Date.now();
          }
        }, 50);
      });
      // Behind it: as many events as the socket takes, as fast as it takes them.
      fast = await floodRuntime(total);
      await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
      local = await startDataplane(makeSnapshot({ sim: urlOf(fast.server), faulty: urlOf(slow), dead: await deadUrl() }), memorySink());
    });
    afterAll(async () => {
      await local.app.close();
      for (const s of [slow, fast.server]) {
        s.closeAllConnections();
        s.close();
      }
    });

    it('keeps flowing once it has the socket: the drain it waits for moves from the response to the socket', async () => {
      // The second response waits in Node's buffer behind the first (its writes return false there and its runtime is
      // paused until the response gets the socket); then its chunks go to the socket directly, and with the client not
      // reading those return false too: the runtime must be resumed by the socket's drain, not the response's.
      const client = await rawClient(local.url);
      try {
        const body = (model: string): string => JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'pipelined' }] });
        client.socket.write(requestText('/endpoints/v1/chat/completions', body('faulty-model')) + requestText('/endpoints/v1/chat/completions', body(NAME)));
        client.socket.pause();
        // The second runtime wrote again after the first stream ended (its response had the socket), then stalled.
        await waitFor(() => slowDoneAt > 0 && fast.lastWrite() > slowDoneAt && fast.waiting() && Date.now() - fast.lastWrite() > 500, 15_000);
        expect(fast.written()).toBeLessThan(total);
        client.socket.resume();
        await waitFor(() => {
          const first = parseChunked(client.bytes());
          return first !== null && parseChunked(first.rest) !== null;
        }, 20_000);
        const first = parseChunked(client.bytes())!;
        const second = parseChunked(first.rest)!;
        expect(dataLines(Buffer.concat(first.chunks).toString('utf8'))).toHaveLength(41);
        const data = dataLines(Buffer.concat(second.chunks).toString('utf8'));
        expect(data).toHaveLength(total + 1);
        expect(data.at(-1)).toBe('[DONE]');
        expect(data.every((d, i) => i === total || d.includes(`"content":"${i} `))).toBe(true);
      } finally {
        client.socket.destroy();
      }
    }, 40_000);
  });

  describe('a client that stops reading', () => {
    const total = 60_000;
    let runtime: FloodRuntime;
    let local: StartedApp;

    beforeAll(async () => {
      runtime = await floodRuntime(total);
      const url = urlOf(runtime.server);
      local = await startDataplane(makeSnapshot({ sim: url, faulty: url, dead: await deadUrl() }), memorySink());
    });
    afterAll(async () => {
      await local.app.close();
      runtime.server.closeAllConnections();
      runtime.server.close();
    });

    it('holds the runtime back while it does not read, then delivers every event once, in order', async () => {
      const client = await rawClient(local.url);
      try {
        const body = JSON.stringify({ model: NAME, stream: true, messages: [{ role: 'user', content: 'a lot' }] });
        client.socket.write(requestText('/endpoints/v1/chat/completions', body));
        await waitFor(() => client.bytes().length > 0);
        client.socket.pause();
        // The node stops reading the runtime once the client's socket is full: the runtime is left waiting for a
        // drain that does not come (a node that read on would take all of it into memory, and the runtime would finish).
        await waitFor(() => runtime.waiting() && Date.now() - runtime.lastWrite() > 500, 10_000);
        const stalledAt = runtime.written();
        expect(stalledAt).toBeLessThan(total);
        client.socket.resume();
        await waitFor(() => parseChunked(client.bytes()) !== null, 20_000);
        const r = parseChunked(client.bytes())!;
        const data = dataLines(Buffer.concat(r.chunks).toString('utf8'));
        expect(data).toHaveLength(total + 1);
        expect(data.at(-1)).toBe('[DONE]');
        for (let i = 0; i < total; i++) {
          const c = JSON.parse(data[i]!) as { model: string; choices: { delta: { content: string } }[] };
          if (c.model !== NAME || !c.choices[0]!.delta.content.startsWith(`${i} `)) throw new Error(`event ${i} out of order or not rewritten: ${data[i]}`);
        }
      } finally {
        client.socket.destroy();
      }
    }, 40_000);

    it.each([
      ['the node’s HTTP/1.1 front', true],
      ['Node’s HTTP server', false],
    ])(
      'cuts a client that reads nothing for the idle time as its own (499), never as the runtime going quiet (%s)',
      async (_, front) => {
        // Fault QA finding: the runtime's connection, paused for a client that stopped reading, ran out its idle timer:
        // the client's stall was billed and counted as the runtime's idle timeout (504), and the healthy replica ejected.
        const flood = await floodRuntime(total);
        const url = urlOf(flood.server);
        const sink = memorySink();
        const node = await startDataplane(makeSnapshot({ sim: url, faulty: url, dead: await deadUrl() }), sink, {
          timeouts: { idleMs: 300 },
          ejection: { failures: 1 },
          front,
        });
        const client = await rawClient(node.url);
        try {
          const body = JSON.stringify({ model: NAME, stream: true, messages: [{ role: 'user', content: 'a lot' }] });
          client.socket.write(requestText('/endpoints/v1/chat/completions', body));
          await waitFor(() => client.bytes().length > 0);
          client.socket.pause();
          await waitFor(() => sink.records.length > 0, 10_000);
          expect(flood.waiting()).toBe(true); // the node held the runtime back until it cut the client
          const [record] = sink.records;
          expect(record).toMatchObject({ status: 499 });
          expect(record!.completionTokens).toBeGreaterThan(0);
          const metrics = await (await fetch(node.metricsUrl)).text();
          expect(metrics).not.toMatch(/dataplane_runtime_errors_total\{reason="idle_timeout"\} [1-9]/);
          expect(metrics).not.toMatch(/dataplane_replica_ejections_total\{[^}]*\} [1-9]/);
          // The client's connection is closed: what it had not read yet ends there, with no runtime error in it.
          client.socket.resume();
          await waitFor(() => client.closed(), 10_000);
          expect(client.bytes().toString('latin1')).not.toContain('upstream_timeout');
        } finally {
          client.socket.destroy();
          await node.app.close();
          flood.server.closeAllConnections();
          flood.server.close();
        }
      },
      40_000,
    );
  });
});
