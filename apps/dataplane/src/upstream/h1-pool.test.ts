import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { H1Head } from './h1-pool.ts';
import {
  bytesOf,
  closeAll,
  codeOf,
  deadOrigin,
  echo,
  failed,
  fewTurns,
  latin1,
  newPool,
  ok,
  reply,
  send,
  settlesWithin,
  startServer,
  waitFor,
  write,
  writeParts,
  type Recorder,
  type SeenRequest,
  READ_MODES,
  useReadMode,
} from './h1-pool-test-support.ts';

// Real sockets only: each test starts a raw TCP server on 127.0.0.1 that writes exact response bytes, and a pool
// dialled through undici's connector, as upstream-pools.ts builds it (the helpers are in h1-pool-test-support.ts).

afterEach(closeAll);

describe.each(READ_MODES)('%s reads', (mode) => {
  beforeAll(() => useReadMode(mode));

  describe('H1Pool: the request on the wire', () => {
    it('writes method, path, host, the given headers, keep-alive and the UTF-8 byte length of a string body', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      const body = '{"messages":[{"role":"user","content":"é 日本 🙂"}]}';
      const rec = await ok(send(pool, body, {}, { 'content-type': 'application/json', authorization: 'Bearer abc', 'x-request-id': 'r-1' }));

      const seen = srv.requests[0]!;
      const lines = seen.head.split('\r\n');
      expect(lines[0]).toBe('POST /v1/chat/completions HTTP/1.1');
      const fields = lines.slice(1).map((l) => l.toLowerCase());
      const port = new URL(srv.origin).port;
      expect(fields).toContain(`host: 127.0.0.1:${port}`);
      expect(fields).toContain('connection: keep-alive');
      expect(fields).toContain('content-type: application/json');
      expect(fields).toContain('authorization: bearer abc');
      expect(fields).toContain('x-request-id: r-1');
      const lengths = fields.filter((l) => l.startsWith('content-length:'));
      expect(lengths).toEqual([`content-length: ${Buffer.byteLength(body)}`]);
      expect(Buffer.byteLength(body)).toBeGreaterThan(body.length);
      expect(seen.body.toString('utf8')).toBe(body);
      expect(rec.body.toString('utf8')).toBe(body);
    });

    it('sends a Buffer body byte for byte with its length', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      const body = Buffer.from([0x00, 0xff, 0x0d, 0x0a, 0x0d, 0x0a, 0xc3, 0x28, 0x7b, 0x7d]);
      await ok(send(pool, body, {}, { 'content-type': 'application/octet-stream' }));
      const seen = srv.requests[0]!;
      expect(seen.head.split('\r\n').filter((l) => l.toLowerCase().startsWith('content-length:'))).toEqual([`content-length: ${body.length}`]);
      expect(seen.body.equals(body)).toBe(true);
    });

    it('an empty body still carries content-length: 0', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      await ok(send(pool, ''));
      expect(srv.requests[0]!.head.toLowerCase()).toContain('\r\ncontent-length: 0');
    });
  });

  describe('H1Pool: Content-Length responses', () => {
    const body = Buffer.concat([Buffer.from('{"text":"é 日本"}\r\n\r\nHTTP/1.1 200 OK\r\n'), Buffer.from([0, 255, 13, 10])]);
    const response = Buffer.concat([
      latin1(
        'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Dup: one\r\nx-dup: two\r\nX-DUP: three\r\nX-Padded:   spaced value  \r\nX-Empty:\r\n',
      ),
      latin1(`Content-Length: ${body.length}\r\n\r\n`),
      body,
    ]);

    const check = (rec: Recorder): void => {
      expect(rec.status).toBe(201);
      expect(rec.statusMessage).toBe('Created');
      const head = rec.head!;
      expect(head).toBeInstanceOf(H1Head);
      expect(head.get('content-type')).toBe('application/json');
      // A repeated field: `get` reads the first one, whatever the case of its name on the wire.
      expect(head.get('x-dup')).toBe('one');
      expect(head.get('x-padded')).toBe('spaced value');
      expect(head.get('x-empty')).toBe('');
      expect(head.get('content-length')).toBe(String(body.length));
      expect(head.get('x-absent')).toBeUndefined();
      expect(head.get('x-du')).toBeUndefined();
      expect(rec.body.equals(body)).toBe(true);
      expect(rec.events[0]).toBe('requestStart');
      expect(rec.events[1]).toBe('responseStart');
      expect(rec.events.at(-1)).toBe('end');
    };

    it('gives status, reason, the header fields (names case-insensitive, first of a repeated one) and the body bytes exactly', async () => {
      const srv = await startServer((req) => req.socket.write(response));
      const pool = newPool(srv.origin);
      check(await ok(send(pool)));
    });

    it('parses the same when the response arrives one byte per write', async () => {
      const srv = await startServer((req) => writeParts(req.socket, bytesOf(response)));
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      check(rec);
      // The body came in pieces, so the split reads were exercised.
      expect(rec.chunks.length).toBeGreaterThan(1);
    });

    it('a status line without a reason phrase has an empty status message', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok'));
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.status).toBe(200);
      expect(rec.statusMessage).toBe('');
      expect(rec.body.toString()).toBe('ok');
    });

    it('Content-Length repeated with the same value is accepted', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok'));
      const pool = newPool(srv.origin);
      expect((await ok(send(pool))).body.toString()).toBe('ok');
    });
  });

  describe('H1Pool: chunked responses', () => {
    const head = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n';
    const chunks = ['5;ext=1\r\nhello\r\n', '1a; name="quoted;value"\r\nabcdefghijklmnopqrstuvwxyz\r\n', '3 ;bws\r\n\xe9\x00\xff\r\n', 'A\r\ndata: {}\n\n\r\n'];
    const tail = '0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n';
    const response = latin1(head + chunks.join('') + tail);
    const expectedBody = latin1('hello' + 'abcdefghijklmnopqrstuvwxyz' + '\xe9\x00\xff' + 'data: {}\n\n');

    it('concatenates the chunks, skipping extensions and trailers, and keeps the connection', async () => {
      const srv = await startServer((req) => req.socket.write(response));
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.status).toBe(200);
      expect(rec.head!.get('transfer-encoding')).toBe('chunked');
      expect(rec.body.equals(expectedBody)).toBe(true);
      await ok(send(pool));
      expect(srv.sockets.length).toBe(1);
    });

    it('parses the same response split in two writes at every byte boundary', async () => {
      let split = 1;
      const srv = await startServer((req) => writeParts(req.socket, [response.subarray(0, split), response.subarray(split)]));
      const pool = newPool(srv.origin);
      for (split = 1; split < response.length; split++) {
        const rec = await ok(send(pool));
        expect(rec.status, `split at ${split}`).toBe(200);
        expect(rec.body.equals(expectedBody), `split at ${split}`).toBe(true);
      }
      // Every response ended exactly where it should: one connection served them all.
      expect(srv.sockets.length).toBe(1);
      expect(srv.requests.length).toBe(response.length - 1);
    });

    it('Transfer-Encoding chunked with a Content-Length: chunked framing wins, the connection is not reused', async () => {
      const srv = await startServer((req) =>
        req.socket.write(req.index === 0 ? 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n' : reply('next')),
      );
      const pool = newPool(srv.origin);
      expect((await ok(send(pool))).body.toString()).toBe('ok');
      expect((await ok(send(pool))).body.toString()).toBe('next');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('a Transfer-Encoding other than chunked last reads the body to the close', async () => {
      const srv = await startServer((req) => req.socket.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n2\r\nok\r\n'));
      const pool = newPool(srv.origin);
      expect((await ok(send(pool))).body.toString()).toBe('2\r\nok\r\n');
    });

    it('parses the same response one byte per write', async () => {
      const srv = await startServer((req) => writeParts(req.socket, bytesOf(response)));
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.body.equals(expectedBody)).toBe(true);
      await ok(send(pool, 'again'));
      expect(srv.sockets.length).toBe(1);
    });
  });

  describe('H1Pool: keep-alive', () => {
    it('two sequential requests share one connection', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      expect((await ok(send(pool, 'one'))).body.toString()).toBe('one');
      expect((await ok(send(pool, 'two'))).body.toString()).toBe('two');
      expect(srv.sockets.length).toBe(1);
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 0]);
      expect(pool.stats).toEqual({ pending: 0, connected: 1, busy: 0 });
    });

    it('a `connection: close` response is not reused: the next request opens a new connection', async () => {
      const srv = await startServer((req) => req.socket.write(reply('bye', req.index === 0 ? 'Connection: close\r\n' : '')));
      const pool = newPool(srv.origin);
      await ok(send(pool));
      await ok(send(pool));
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the first connection to close');
    });

    it('an HTTP/1.0 response without keep-alive is not reused; with `Connection: keep-alive` it is', async () => {
      const srv = await startServer((req) =>
        req.socket.write(`HTTP/1.0 200 OK\r\n${req.index >= 1 ? 'Connection: keep-alive\r\n' : ''}Content-Length: 2\r\n\r\nok`),
      );
      const pool = newPool(srv.origin);
      expect((await ok(send(pool))).body.toString()).toBe('ok');
      await ok(send(pool));
      await ok(send(pool));
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1, 1]);
    });

    it('an idle connection the server closes is forgotten; the next request succeeds on a new one', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      await ok(send(pool, 'a'));
      srv.sockets[0]!.end();
      await waitFor(() => pool.stats.connected === 0, 'the pool to see the close');
      expect((await ok(send(pool, 'b'))).body.toString()).toBe('b');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('an idle connection is not reused once the keepAliveTimeout has passed', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 4, { keepAliveTimeout: 50 });
      await ok(send(pool, 'a'));
      const t0 = performance.now();
      await waitFor(() => performance.now() - t0 > 80, '80 ms');
      await ok(send(pool, 'b'));
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the expired connection to close');
    });

    it('`Keep-Alive: timeout=1` (less the 1 s margin) means the connection is never reused', async () => {
      const srv = await startServer((req) => req.socket.write(reply('ok', 'Keep-Alive: timeout=1\r\n')));
      const pool = newPool(srv.origin, 4, { keepAliveTimeout: 50 });
      await ok(send(pool));
      const t0 = performance.now();
      await waitFor(() => performance.now() - t0 > 5, 'a few ms');
      await ok(send(pool));
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('a longer `Keep-Alive: timeout=5` hint keeps the connection in use', async () => {
      const srv = await startServer((req) => req.socket.write(reply('ok', 'Keep-Alive: timeout=5, max=100\r\n')));
      const pool = newPool(srv.origin);
      await ok(send(pool));
      await ok(send(pool));
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 0]);
    });
  });

  describe('H1Pool: bodies and statuses', () => {
    it('a body with neither length nor chunking runs until the server closes, and ends cleanly', async () => {
      const srv = await startServer((req) => {
        req.socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nfirst ');
        setTimeout(() => req.socket.end('second'), 5);
      });
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.status).toBe(200);
      expect(rec.body.toString()).toBe('first second');
      expect(pool.stats.connected).toBe(0);
      await ok(send(pool));
      expect(srv.sockets.length).toBe(2);
    });

    it('skips 100 Continue and 103 Early Hints before the real response', async () => {
      const interim = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n';
      const srv = await startServer((req) =>
        req.index === 0 ? req.socket.write(interim + 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok') : writeParts(req.socket, [latin1(interim), reply('ok')]),
      );
      const pool = newPool(srv.origin);
      for (let i = 0; i < 2; i++) {
        const rec = await ok(send(pool));
        expect(rec.status).toBe(200);
        expect(rec.head!.get('content-length')).toBe('2');
        expect(rec.head!.get('link')).toBeUndefined();
        expect(rec.events.filter((e) => e === 'responseStart')).toEqual(['responseStart']);
        expect(rec.body.toString()).toBe('ok');
      }
      expect(srv.sockets.length).toBe(1);
    });

    it('a 101 Switching Protocols is an UPSTREAM_PROTOCOL error', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'));
      const pool = newPool(srv.origin);
      const rec = send(pool);
      expect(codeOf(await failed(rec))).toBe('UPSTREAM_PROTOCOL');
      expect(rec.events).not.toContain('responseStart');
    });

    it('a 204 without a body completes and keeps the connection', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 204 No Content\r\nX-Request-Id: r\r\n\r\n'));
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.status).toBe(204);
      expect(rec.body.length).toBe(0);
      await ok(send(pool));
      expect(srv.sockets.length).toBe(1);
    });

    it('Content-Length: 0 completes at once', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.events).toEqual(['requestStart', 'responseStart', 'end']);
    });
  });

  describe('H1Pool: malformed responses', () => {
    const big = 'a'.repeat(65 * 1024);
    const cases: { name: string; bytes: string }[] = [
      { name: 'bad status line (not HTTP)', bytes: 'HTTX/1.1 200 OK\r\nContent-Length: 0\r\n\r\n' },
      { name: 'bad status line (no code)', bytes: 'HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n' },
      { name: 'bad status line (HTTP/2)', bytes: 'HTTP/2 200\r\nContent-Length: 0\r\n\r\n' },
      { name: 'bad status line (four-digit code)', bytes: 'HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n' },
      { name: 'header line without a colon', bytes: 'HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 0\r\n\r\n' },
      { name: 'obs-fold continuation line', bytes: 'HTTP/1.1 200 OK\r\nX-A: a\r\n folded: b\r\nContent-Length: 0\r\n\r\n' },
      { name: 'obs-fold continuation line without colon', bytes: 'HTTP/1.1 200 OK\r\nX-A: a\r\n\tfolded\r\nContent-Length: 0\r\n\r\n' },
      { name: 'space before the colon', bytes: 'HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n' },
      { name: 'bare LF line ending inside the head', bytes: 'HTTP/1.1 200 OK\nX-A: a\r\nContent-Length: 0\r\n\r\n' },
      { name: 'bare CR inside a header value', bytes: 'HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n' },
      { name: 'NUL in a header value', bytes: 'HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 0\r\n\r\n' },
      { name: 'empty header name', bytes: 'HTTP/1.1 200 OK\r\n: v\r\nContent-Length: 0\r\n\r\n' },
      { name: 'header name with a space inside', bytes: 'HTTP/1.1 200 OK\r\nBad Name: v\r\nContent-Length: 0\r\n\r\n' },
      { name: 'header name with a non-token character', bytes: 'HTTP/1.1 200 OK\r\nX{Y}: v\r\nContent-Length: 0\r\n\r\n' },
      { name: 'two different Content-Length values', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok' },
      { name: 'non-numeric Content-Length', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok' },
      { name: 'bad chunk size', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n' },
      { name: 'negative chunk size', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nabc\r\n0\r\n\r\n' },
      { name: 'chunk data not followed by CRLF', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n' },
      { name: 'head over 64 KiB (terminated)', bytes: `HTTP/1.1 200 OK\r\nX-Big: ${big}\r\nContent-Length: 0\r\n\r\n` },
      { name: 'head over 64 KiB (never terminated)', bytes: `HTTP/1.1 200 OK\r\nX-Big: ${big}${big}` },
    ];

    it.each(cases)('$name → UPSTREAM_PROTOCOL, connection dropped, pool still usable', async ({ bytes }) => {
      // The server never closes: the failure must come from the parser, not from the peer.
      const srv = await startServer((req) => req.socket.write(req.index === 0 ? latin1(bytes) : reply('fine')));
      const pool = newPool(srv.origin);
      const err = await failed(send(pool));
      expect(codeOf(err)).toBe('UPSTREAM_PROTOCOL');
      expect(pool.stats.connected).toBe(0);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the bad connection to be closed');
      const next = await ok(send(pool));
      expect(next.body.toString()).toBe('fine');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('bytes after a complete Content-Length response in the same write: the response succeeds, the connection is dropped', async () => {
      const srv = await startServer((req) =>
        req.socket.write(req.index === 0 ? 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n' : reply('next')),
      );
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.body.toString()).toBe('ok');
      await waitFor(() => pool.stats.connected === 0, 'the connection to be dropped');
      expect((await ok(send(pool))).body.toString()).toBe('next');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('bytes arriving on an idle connection: it is dropped, the next request uses a new one', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      await ok(send(pool, 'a'));
      srv.sockets[0]!.write('HTTP/1.1 200 OK\r\n');
      await waitFor(() => pool.stats.connected === 0, 'the connection to be dropped');
      expect((await ok(send(pool, 'b'))).body.toString()).toBe('b');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });
  });

  describe('H1Pool: connection failures', () => {
    it('the server closing mid-body fails the request', async () => {
      const srv = await startServer((req) => req.socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'));
      const pool = newPool(srv.origin);
      const rec = send(pool);
      const err = await failed(rec);
      expect(['UND_ERR_SOCKET', 'ECONNRESET']).toContain(codeOf(err));
      expect(rec.status).toBe(200);
      expect(rec.body.toString()).toBe('abc');
    });

    it('the server closing mid-chunk fails the request', async () => {
      const srv = await startServer((req) => req.socket.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab'));
      const pool = newPool(srv.origin);
      expect(['UND_ERR_SOCKET', 'ECONNRESET']).toContain(codeOf(await failed(send(pool))));
    });

    it('the server closing before it sends anything fails the request', async () => {
      const srv = await startServer((req) => req.socket.end());
      const pool = newPool(srv.origin);
      expect(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']).toContain(codeOf(await failed(send(pool))));
      expect(pool.stats.connected).toBe(0);
    });

    it('the server dropping the connection as it accepts it fails the request', async () => {
      const srv = await startServer(echo, { onConnection: (socket) => socket.destroy() });
      const pool = newPool(srv.origin);
      expect(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']).toContain(codeOf(await failed(send(pool))));
    });

    it('a refused connection fails the request with ECONNREFUSED', async () => {
      const pool = newPool(await deadOrigin());
      const err = await failed(send(pool));
      expect(codeOf(err)).toBe('ECONNREFUSED');
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
    });

    it('a header value with CR, LF or NUL (or a bad header name) fails at once and nothing is sent', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      const bad: Record<string, string>[] = [
        { 'x-a': 'v\r\nx-injected: 1' },
        { 'x-a': 'a\nb' },
        { 'x-a': 'a\rb' },
        { 'x-a': 'a\0b' },
        { 'bad name': 'v' },
        { 'x-a:': 'v' },
      ];
      for (const headers of bad) {
        const rec = send(pool, 'x', {}, { 'content-type': 'application/json', ...headers });
        // Synchronous: dispatch answered before returning.
        expect(rec.settled).toBe(true);
        expect(codeOf(rec.error)).toBe('UND_ERR_INVALID_ARG');
        expect(rec.events).toEqual(['requestStart', 'error']);
      }
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
      await fewTurns();
      expect(srv.sockets.length).toBe(0);
      expect(srv.bytesIn).toBe(0);
    });
  });

  describe('H1Pool: connection cap and queue', () => {
    it('with one connection, three requests queue and complete in order', async () => {
      const held: SeenRequest[] = [];
      const srv = await startServer((req) => (req.index === 0 ? held.push(req) : echo(req, srv)));
      const pool = newPool(srv.origin, 1);
      const recs = ['r0', 'r1', 'r2'].map((b) => send(pool, b));
      await waitFor(() => held.length === 1, 'the first request at the server');
      expect(pool.stats).toEqual({ pending: 2, connected: 1, busy: 1 });
      expect(recs.some((r) => r.settled)).toBe(false);
      held[0]!.socket.write(reply(held[0]!.body));
      for (const [i, rec] of recs.entries()) expect((await ok(rec)).body.toString()).toBe(`r${i}`);
      expect(recs[0]!.finishedAs).toBeLessThan(recs[1]!.finishedAs);
      expect(recs[1]!.finishedAs).toBeLessThan(recs[2]!.finishedAs);
      expect(srv.requests.map((r) => `${r.conn}:${r.body.toString()}`)).toEqual(['0:r0', '0:r1', '0:r2']);
      expect(pool.stats).toEqual({ pending: 0, connected: 1, busy: 0 });
    });

    it('opens up to `connections` in parallel', async () => {
      const held: SeenRequest[] = [];
      const srv = await startServer((req) => held.push(req));
      const pool = newPool(srv.origin, 2);
      const recs = [send(pool, 'a'), send(pool, 'b'), send(pool, 'c')];
      await waitFor(() => held.length === 2, 'two requests at the server');
      expect(pool.stats).toEqual({ pending: 1, connected: 2, busy: 2 });
      expect(srv.sockets.length).toBe(2);
      for (const r of held.splice(0)) r.socket.write(reply(r.body));
      await waitFor(() => held.length === 1, 'the third request at the server');
      held[0]!.socket.write(reply(held[0]!.body));
      expect((await Promise.all(recs.map(ok))).map((r) => r.body.toString())).toEqual(['a', 'b', 'c']);
      expect(srv.sockets.length).toBe(2);
    });
  });

  describe('H1Pool: abort', () => {
    it('a queued request aborted fails with the reason and never reaches the server', async () => {
      const held: SeenRequest[] = [];
      const srv = await startServer((req) => (req.index === 0 ? held.push(req) : echo(req, srv)));
      const pool = newPool(srv.origin, 1);
      const first = send(pool, 'A');
      const queued = send(pool, 'B');
      await waitFor(() => held.length === 1, 'the first request at the server');
      expect(pool.stats.pending).toBe(1);
      const reason = new Error('client went away');
      queued.controller!.abort(reason);
      expect(await failed(queued)).toBe(reason);
      expect(queued.controller!.aborted).toBe(true);
      expect(pool.stats.pending).toBe(0);
      held[0]!.socket.write(reply('A'));
      await ok(first);
      await ok(send(pool, 'C'));
      expect(srv.requests.map((r) => r.body.toString())).toEqual(['A', 'C']);
    });

    it('aborting before the response fails with the reason and closes the socket at the server', async () => {
      const srv = await startServer(() => {});
      const pool = newPool(srv.origin);
      const rec = send(pool);
      await waitFor(() => srv.requests.length === 1, 'the request at the server');
      const reason = new Error('cancelled');
      rec.controller!.abort(reason);
      expect(await failed(rec)).toBe(reason);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the server to see the close');
      expect(pool.stats.connected).toBe(0);
    });

    it('aborting mid-body (from onResponseData) fails with the reason, nothing after', async () => {
      const reason = new Error('enough');
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart'));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { data: (c) => c.abort(reason) });
      expect(await failed(rec)).toBe(reason);
      expect(rec.events).toEqual(['requestStart', 'responseStart', 'data', 'error']);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the server to see the close');
      // An abort after the end is a no-op.
      rec.controller!.abort(new Error('late'));
      expect(rec.events.at(-1)).toBe('error');
    });

    it('aborting from onResponseStart fails with the reason and delivers no data', async () => {
      const reason = new Error('not wanted');
      const srv = await startServer((req) => req.socket.write(reply('body bytes')));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { start: (c) => c.abort(reason) });
      expect(await failed(rec)).toBe(reason);
      expect(rec.events).toEqual(['requestStart', 'responseStart', 'error']);
    });
  });

  describe('H1Pool: pause and resume', () => {
    it('no data arrives while paused although the server sends more; after resume the rest arrives and ends', async () => {
      const srv = await startServer((req) => req.socket.write(req.index === 0 ? 'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nfirst:' : reply('next')));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { data: (c) => c.pause() });
      await waitFor(() => rec.chunks.length === 1, 'the first data');
      await write(srv.sockets[0]!, 'second');
      await fewTurns();
      expect(rec.body.toString()).toBe('first:');
      expect(rec.settled).toBe(false);
      rec.controller!.resume();
      await ok(rec);
      expect(rec.body.toString()).toBe('first:second');
      // The connection is reusable afterwards (and no longer paused).
      expect((await ok(send(pool))).body.toString()).toBe('next');
      expect(srv.sockets.length).toBe(1);
    });

    it('pausing from onResponseStart holds the body that came in the same read as the head', async () => {
      const srv = await startServer((req) => req.socket.write(reply('body-in-the-same-packet')));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { start: (c) => c.pause() });
      await waitFor(() => rec.status !== 0, 'the response head');
      await fewTurns();
      // The controller's contract (as undici's): nothing is delivered until resume.
      expect(rec.events).toEqual(['requestStart', 'responseStart']);
      rec.controller!.resume();
      await ok(rec);
      expect(rec.body.toString()).toBe('body-in-the-same-packet');
    });

    it('pausing from onResponseData holds later chunks that came in the same read', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n'));
      const pool = newPool(srv.origin);
      let paused = false;
      let dataWhilePaused = 0;
      const rec = send(pool, 'x', {
        data: (c) => {
          if (paused) dataWhilePaused++;
          if (rec.chunks.length === 1) {
            paused = true;
            c.pause();
          }
        },
      });
      await waitFor(() => rec.chunks.length > 0, 'the first chunk');
      await fewTurns();
      expect(dataWhilePaused).toBe(0);
      expect(rec.settled).toBe(false);
      paused = false;
      rec.controller!.resume();
      await ok(rec);
      expect(rec.body.toString()).toBe('onetwo');
    });

    it('a close-delimited body paused with the close already sent ends cleanly after resume', async () => {
      const srv = await startServer((req) => req.socket.end('HTTP/1.1 200 OK\r\n\r\nall of it'));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { start: (c) => c.pause() });
      await waitFor(() => rec.status !== 0, 'the response head');
      await waitFor(() => srv.closed.size === 1, 'the server to close');
      await fewTurns();
      expect(rec.events).toEqual(['requestStart', 'responseStart']);
      rec.controller!.resume();
      expect((await ok(rec)).body.toString()).toBe('all of it');
    });

    it('a complete `Connection: close` response held by a pause is delivered whole after resume, not failed by the close', async () => {
      const srv = await startServer((req) => req.socket.write(reply('the whole answer', 'Connection: close\r\n')));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { start: (c) => c.pause() });
      await waitFor(() => rec.status !== 0, 'the response head');
      // The server closes a while later, as a runtime does after a `Connection: close` answer.
      srv.sockets[0]!.end();
      await waitFor(() => srv.closed.size === 1, 'the server to close');
      await fewTurns();
      expect(rec.events).toEqual(['requestStart', 'responseStart']);
      rec.controller!.resume();
      expect((await ok(rec)).body.toString()).toBe('the whole answer');
    });

    it('a chunked response paused mid-body, then the server closes after the last chunk: resume delivers it all', async () => {
      const srv = await startServer((req) =>
        req.socket.end('HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n'),
      );
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { data: (c) => (rec.chunks.length === 1 ? c.pause() : undefined) });
      await waitFor(() => rec.chunks.length === 1, 'the first chunk');
      await waitFor(() => srv.closed.size === 1, 'the server to close');
      await fewTurns();
      expect(rec.events).toEqual(['requestStart', 'responseStart', 'data']);
      rec.controller!.resume();
      expect((await ok(rec)).body.toString()).toBe('firstsecond');
    });

    it('aborting while paused with bytes held fails with the reason and drops the connection', async () => {
      const srv = await startServer((req) => req.socket.write(req.index === 0 ? 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nheld' : reply('next')));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { start: (c) => c.pause() });
      await waitFor(() => rec.status !== 0, 'the response head');
      const reason = new Error('gone');
      rec.controller!.abort(reason);
      expect(await failed(rec)).toBe(reason);
      expect(rec.events).toEqual(['requestStart', 'responseStart', 'error']);
      // resume after the end does nothing
      rec.controller!.resume();
      expect((await ok(send(pool))).body.toString()).toBe('next');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('pause then resume inside the same onResponseData keeps the data flowing', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n'));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', {
        data: (c) => {
          c.pause();
          c.resume();
        },
      });
      expect((await ok(rec)).body.toString()).toBe('abc');
    });

    it('a request paused before its response starts still gets it after resume', async () => {
      const srv = await startServer((req) => req.socket.write(reply('late')));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'x', { request: (c) => c.pause() });
      await waitFor(() => srv.requests.length === 1, 'the request at the server');
      await fewTurns();
      expect(rec.events).toEqual(['requestStart']);
      rec.controller!.resume();
      expect((await ok(rec)).body.toString()).toBe('late');
    });
  });

  describe('H1Pool: close and destroy', () => {
    it('close() lets the in-flight request finish, then resolves; dispatch after close fails with UND_ERR_CLOSED', async () => {
      const held: SeenRequest[] = [];
      const srv = await startServer((req) => held.push(req));
      const pool = newPool(srv.origin);
      const rec = send(pool, 'in flight');
      await waitFor(() => held.length === 1, 'the request at the server');
      let closed = false;
      let closedAfterEnd = false;
      const closing = pool.close().then(() => {
        closed = true;
        closedAfterEnd = rec.settled;
      });
      const late = send(pool);
      expect(codeOf(await failed(late))).toBe('UND_ERR_CLOSED');
      await fewTurns();
      expect(closed).toBe(false);
      held[0]!.socket.write(reply('done'));
      expect((await ok(rec)).body.toString()).toBe('done');
      await closing;
      expect(closedAfterEnd).toBe(true);
      expect(pool.stats.connected).toBe(0);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the connection to close');
    });

    it('close() with only idle connections resolves at once and closes them', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      await ok(send(pool));
      await pool.close();
      expect(pool.stats.connected).toBe(0);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the idle connection to close');
    });

    it('close() resolves when the only pending connect fails', async () => {
      const pool = newPool(await deadOrigin());
      const rec = send(pool);
      const closing = pool.close();
      expect(codeOf(await failed(rec))).toBe('ECONNREFUSED');
      expect(await settlesWithin(closing, 1000)).toBe(true);
    });

    it('destroy() fails the in-flight and the queued requests with UND_ERR_DESTROYED', async () => {
      const srv = await startServer(() => {});
      const pool = newPool(srv.origin, 1);
      const inFlight = send(pool, 'a');
      const queued = send(pool, 'b');
      await waitFor(() => srv.requests.length === 1, 'the request at the server');
      await pool.destroy();
      expect(codeOf(await failed(inFlight))).toBe('UND_ERR_DESTROYED');
      expect(codeOf(await failed(queued))).toBe('UND_ERR_DESTROYED');
      expect(codeOf(await failed(send(pool)))).toBe('UND_ERR_DESTROYED');
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the connection to close');
      expect(srv.requests.length).toBe(1);
    });
  });

  describe('H1Pool: response header names', () => {
    it('field names that are Object.prototype members read as the values sent', async () => {
      const srv = await startServer((req) => req.socket.write(reply('ok', 'Constructor: c-value\r\n__proto__: p-value\r\nX-Normal: n\r\n')));
      const pool = newPool(srv.origin);
      const head = (await ok(send(pool))).head!;
      expect(head.get('x-normal')).toBe('n');
      expect(head.get('constructor')).toBe('c-value');
      expect(head.get('__proto__')).toBe('p-value');
      expect(head.get('tostring')).toBeUndefined();
    });
  });
});
