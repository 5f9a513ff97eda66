import { createServer } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { H1Pool } from './h1-pool.ts';
import {
  closeAll,
  codeOf,
  echo,
  failed,
  fewTurns,
  latin1,
  listen,
  newServerState,
  ok,
  poolMaker,
  reply,
  send,
  serve,
  settlesWithin,
  startServer,
  terminals,
  waitFor,
  type Recorder,
  type Responder,
  type SeenRequest,
  type TestServer,
  READ_MODES,
  useReadMode,
} from './h1-pool-test-support.ts';
import { isConnectError, isResetBeforeAnswer } from '../proxy/upstream-errors.ts';

// Faults and hostile runtimes for h1-pool.ts: the state machine under aborts and re-entrant handlers, framing against
// a hostile runtime, keep-alive races, backpressure, close()/destroy(), TLS and IPv6 origins. Real sockets only
// (node:net / node:tls servers on loopback writing exact bytes), dialled through undici's connector as
// upstream-pools.ts does. Four of these failed against the pool's first version (an IPv6 literal dialled with its
// brackets, a queued request written on a socket closed while a paused handler held the last response, a throw
// while resume() replayed held bytes, close() after destroy() with a dial in flight).

// ---------------------------------------------------------------------------------------------------------------
// Helpers: the shared ones are in h1-pool-test-support.ts (with h1-pool.test.ts); TLS and IPv6 are this file's.

afterEach(closeAll);

// A throwaway self-signed certificate for localhost / 127.0.0.1 (test only; valid until 2126).
const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBmzCCAUGgAwIBAgIUf2fflcQH/B3MJzVYJ8MdvG3FFAcwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyMzA0MDU0N1oYDzIxMjYxMDMw
MDQwNTQ3WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAASxR8rzpENHu/ouDV5jGZ+8b3umTY9tJz4Wa/N9fEZVS4PUE8DzF32/
yMfDDrlamUDi8wn7bMxPaeSlATQ9ddpTo28wbTAdBgNVHQ4EFgQU1zL+TCdcxayR
vqkXGgJ59iWk3PIwHwYDVR0jBBgwFoAU1zL+TCdcxayRvqkXGgJ59iWk3PIwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI
zj0EAwIDSAAwRQIgM+VHEeYMoOQQChtZanmgc7H3SKz7xfnw90rAuzr0WKICIQDX
vUnKTwKkZPnMk3Fysyeq4WLpK1wggPEUKrhcL4XAbA==
-----END CERTIFICATE-----
`;
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPl3nR5HwgXmWpNQH
EEXEf9BTEH55HuasKtOcjinEg7ShRANCAASxR8rzpENHu/ouDV5jGZ+8b3umTY9t
Jz4Wa/N9fEZVS4PUE8DzF32/yMfDDrlamUDi8wn7bMxPaeSlATQ9ddpT
-----END PRIVATE KEY-----
`;

async function startTlsServer(respond: Responder): Promise<TestServer> {
  const state = newServerState();
  const srv = createTlsServer({ cert: TEST_CERT, key: TEST_KEY, ALPNProtocols: ['http/1.1'] }, (socket: TLSSocket) => serve(state, socket, respond));
  const port = await listen(srv, '127.0.0.1');
  return Object.assign(state, { origin: `https://localhost:${port}` });
}

const newPool = poolMaker({ ca: TEST_CERT });

/** Nothing busy, queued or dialling: close() settles at once and leaves no connection counted. */
async function expectDrained(pool: H1Pool): Promise<void> {
  await waitFor(() => pool.stats.busy === 0 && pool.stats.pending === 0, 'nothing busy or queued in the pool');
  expect(await settlesWithin(pool.close(), 1000)).toBe(true);
  expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
}

/** Whether this host can listen on IPv6 loopback (the IPv6 test is skipped where it cannot). */
const hasIpv6Loopback = await new Promise<boolean>((resolve) => {
  const probe = createServer();
  probe.once('error', () => resolve(false));
  probe.listen(0, '::1', () => probe.close(() => resolve(true)));
});

// ---------------------------------------------------------------------------------------------------------------

describe.each(READ_MODES)('%s reads', (mode) => {
  beforeAll(() => useReadMode(mode));

  describe('H1Pool review: abort at every phase leaves one terminal callback and no leak', () => {
    const chunkedHead = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
    // `seen`: what the handler must have heard before the abort (so it lands in the phase named, not an earlier one).
    const phases: { name: string; bytes: string; seen: number }[] = [
      { name: 'request written, nothing back', bytes: '', seen: 0 },
      { name: 'mid status line', bytes: 'HTTP/1.1 20', seen: 0 },
      { name: 'mid header block', bytes: 'HTTP/1.1 200 OK\r\nContent-Le', seen: 0 },
      { name: 'after a 100 Continue', bytes: 'HTTP/1.1 100 Continue\r\n\r\n', seen: 0 },
      { name: 'head done, Content-Length body not started', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n', seen: 1 },
      { name: 'mid Content-Length body', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc', seen: 2 },
      { name: 'mid chunk-size line', bytes: chunkedHead + '1', seen: 1 },
      { name: 'mid chunk data', bytes: chunkedHead + 'a\r\nabc', seen: 2 },
      { name: 'between chunk data and its CRLF', bytes: chunkedHead + '3\r\nabc\r', seen: 2 },
      { name: 'in trailers', bytes: chunkedHead + '3\r\nabc\r\n0\r\nX-T: 1\r\n', seen: 2 },
      { name: 'mid close-delimited body', bytes: 'HTTP/1.1 200 OK\r\n\r\nsome', seen: 2 },
    ];

    it.each(phases)('abort $name', async ({ bytes, seen }) => {
      const srv = await startServer((req) => (req.index === 0 ? bytes !== '' && req.socket.write(latin1(bytes)) : echo(req, srv)));
      const pool = newPool(srv.origin, 2);
      const rec = send(pool, 'first');
      await waitFor(() => srv.requests.length === 1, 'the request at the server');
      if (bytes !== '') await waitFor(() => srv.sockets[0]!.writableLength === 0, 'the bytes to leave the server');
      if (seen >= 1) await waitFor(() => rec.status === 200, 'the response head');
      if (seen >= 2) await waitFor(() => rec.chunks.length > 0, 'some body');
      // (Phases before the head give no signal: a few turns let the pool read what was sent.)
      if (seen === 0) await fewTurns();
      expect(rec.settled).toBe(false);
      const reason = new Error('abort now');
      rec.controller!.abort(reason);
      expect(await failed(rec)).toBe(reason);
      // A second abort, a pause and a resume after the end are no-ops.
      rec.controller!.abort(new Error('again'));
      rec.controller!.pause();
      rec.controller!.resume();
      expect(terminals(rec)).toEqual(['error']);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the aborted connection to close at the server');
      expect((await ok(send(pool, 'next'))).body.toString()).toBe('next');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
      await waitFor(() => pool.stats.busy === 0, 'the pool to be idle');
      expect(pool.stats).toEqual({ pending: 0, connected: 1, busy: 0 });
      expect(await settlesWithin(pool.close(), 1000)).toBe(true);
    });

    it('abort while the connection is still being dialled: the socket that opens later is not leaked', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 2);
      const rec = send(pool);
      // The dial has not completed yet (it needs at least one event-loop turn).
      expect(pool.stats).toEqual({ pending: 1, connected: 0, busy: 0 });
      const reason = new Error('gone before connect');
      rec.controller!.abort(reason);
      expect(await failed(rec)).toBe(reason);
      expect(pool.stats.pending).toBe(0);
      // close() waits for the dial, then closes the idle connection it gave.
      expect(await settlesWithin(pool.close(), 1000)).toBe(true);
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
      await waitFor(() => srv.sockets.length === 0 || srv.closed.has(srv.sockets[0]!), 'the late socket to close');
    });

    it('abort from onRequestStart: nothing is dialled or sent', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin);
      const reason = new Error('no');
      const rec = send(pool, 'x', { request: (c) => c.abort(reason) });
      expect(rec.settled).toBe(true);
      expect(rec.error).toBe(reason);
      expect(rec.events).toEqual(['requestStart', 'error']);
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
      await fewTurns();
      expect(srv.sockets.length).toBe(0);
      await expectDrained(pool);
    });

    it('abort from onResponseEnd or onResponseError is a no-op (no second terminal callback)', async () => {
      const srv = await startServer((req) => req.socket.write(req.index === 0 ? reply('fine') : latin1('HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n')));
      const pool = newPool(srv.origin, 1);
      const a = await ok(send(pool, 'a', { end: (c) => c.abort(new Error('late')) }));
      expect(a.body.toString()).toBe('fine');
      const b = send(pool, 'b', { error: (c) => c.abort(new Error('late')) });
      expect(codeOf(await failed(b))).toBe('UPSTREAM_PROTOCOL');
      await fewTurns();
      expect(terminals(a)).toEqual(['end']);
      expect(terminals(b)).toEqual(['error']);
      await expectDrained(pool);
    });
  });

  describe('H1Pool review: re-entrant handlers', () => {
    it('a request dispatched from inside onResponseEnd goes on the same connection once it is free (never on two exchanges)', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 1);
      let inner: Recorder | null = null;
      const outer = send(pool, 'outer', { end: () => (inner = send(pool, 'inner')) });
      expect((await ok(outer)).body.toString()).toBe('outer');
      await waitFor(() => inner !== null, 'the inner dispatch');
      expect((await ok(inner!)).body.toString()).toBe('inner');
      expect(srv.requests.map((r) => `${r.conn}:${r.body.toString()}`)).toEqual(['0:outer', '0:inner']);
      expect(pool.stats).toEqual({ pending: 0, connected: 1, busy: 0 });
      await expectDrained(pool);
    });

    it('a request dispatched from inside onResponseError (a protocol error) gets a new connection', async () => {
      const srv = await startServer((req) => req.socket.write(req.index === 0 ? latin1('HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok') : reply('again')));
      const pool = newPool(srv.origin, 1);
      let retry: Recorder | null = null;
      const first = send(pool, 'x', { error: () => (retry = send(pool, 'y')) });
      expect(codeOf(await failed(first))).toBe('UPSTREAM_PROTOCOL');
      expect((await ok(retry!)).body.toString()).toBe('again');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
      await expectDrained(pool);
    });

    it('destroy() from inside onResponseData fails that exchange once and the queued one, and leaves nothing', async () => {
      const srv = await startServer((req) => req.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'));
      const pool = newPool(srv.origin, 1);
      const a = send(pool, 'a', { data: () => void pool.destroy() });
      const b = send(pool, 'b');
      expect(codeOf(await failed(a))).toBe('UND_ERR_DESTROYED');
      expect(codeOf(await failed(b))).toBe('UND_ERR_DESTROYED');
      await fewTurns();
      expect(a.events).toEqual(['requestStart', 'responseStart', 'data', 'error']);
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
    });

    it('close() from inside onResponseEnd resolves once that connection is back', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 1);
      let closing: Promise<void> | null = null;
      await ok(send(pool, 'a', { end: () => (closing = pool.close()) }));
      expect(await settlesWithin(closing!, 1000)).toBe(true);
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the connection to close');
    });
  });

  describe('H1Pool review: close() and destroy()', () => {
    it('close() finishes the in-flight and the queued requests (in order) before it resolves', async () => {
      const held: SeenRequest[] = [];
      const srv = await startServer((req) => (req.index === 0 ? held.push(req) : echo(req, srv)));
      const pool = newPool(srv.origin, 1);
      const recs = ['r0', 'r1', 'r2'].map((b) => send(pool, b));
      await waitFor(() => held.length === 1, 'the first request at the server');
      let closed = false;
      const closing = pool.close().then(() => (closed = true));
      await fewTurns();
      expect(closed).toBe(false);
      expect(pool.stats.pending).toBe(2);
      held[0]!.socket.write(reply('r0'));
      for (const [i, rec] of recs.entries()) expect((await ok(rec)).body.toString()).toBe(`r${i}`);
      expect(await settlesWithin(closing, 1000)).toBe(true);
      expect(srv.requests.map((r) => `${r.conn}:${r.body.toString()}`)).toEqual(['0:r0', '0:r1', '0:r2']);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the connection to close');
    });

    it('close() while the busy connection dies with requests queued: they get a new connection, then close resolves', async () => {
      const srv = await startServer((req) => (req.index === 0 ? req.socket.destroy() : echo(req, srv)));
      const pool = newPool(srv.origin, 1);
      const first = send(pool, 'a');
      const queued = send(pool, 'b');
      const closing = pool.close();
      expect(isResetBeforeAnswer(await failed(first))).toBe(true);
      expect((await ok(queued)).body.toString()).toBe('b');
      expect(await settlesWithin(closing, 1000)).toBe(true);
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
    });

    it('close() with a queued request aborted while its dial runs resolves', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 1);
      const rec = send(pool);
      const closing = pool.close();
      rec.controller!.abort(new Error('bye'));
      await failed(rec);
      expect(await settlesWithin(closing, 1000)).toBe(true);
      expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
    });

    it('destroy() while a dial is in flight resolves at once; the socket that opens later is closed', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 1);
      const rec = send(pool);
      expect(await settlesWithin(pool.destroy(), 100)).toBe(true);
      expect(codeOf(await failed(rec))).toBe('UND_ERR_DESTROYED');
      await waitFor(() => srv.sockets.length === 1 && srv.closed.has(srv.sockets[0]!), 'the late socket to be closed');
      expect(srv.requests.length).toBe(0);
    });

    it('close() after destroy() while a dial is in flight still resolves', async () => {
      // h1-pool.ts:612/617: the dial callback returns early when destroyed, without settleClose().
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 1);
      const rec = send(pool);
      void pool.destroy();
      const closing = pool.close();
      await failed(rec);
      expect(await settlesWithin(closing, 1000)).toBe(true);
    });
  });

  describe('H1Pool review: a hostile or broken runtime', () => {
    const bad: { name: string; bytes: string }[] = [
      { name: 'Content-Length with a leading +', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok' },
      { name: 'negative Content-Length', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok' },
      { name: 'hex Content-Length', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 0x2\r\n\r\nok' },
      { name: 'exponent Content-Length', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2e0\r\n\r\nok' },
      { name: 'empty Content-Length', bytes: 'HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nok' },
      { name: 'Content-Length list', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok' },
      { name: 'Content-Length past 2^53 (16 digits)', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 9007199254740993\r\n\r\nok' },
      { name: 'Content-Length with inner space', bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\nok' },
      { name: 'chunk size with 0x', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n' },
      { name: 'chunk size with +', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\nok\r\n0\r\n\r\n' },
      { name: 'chunk size with leading space', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\nok\r\n0\r\n\r\n' },
      { name: 'chunk size of 13 hex digits (past 2^48)', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000\r\nok\r\n' },
      { name: 'chunk size of 40 hex digits (past 2^53)', bytes: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${'f'.repeat(40)}\r\nok\r\n` },
      { name: 'empty chunk-size line', bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\nok\r\n' },
      { name: 'chunk-size line over 8 KiB, never ended', bytes: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${'e'.repeat(9000)}` },
      { name: 'trailer line over 8 KiB, never ended', bytes: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: ${'t'.repeat(9000)}` },
      { name: 'interim 101 after a 100', bytes: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\n' },
      { name: 'header after a CR-only line end', bytes: 'HTTP/1.1 200 OK\r\nX-A: 1\rContent-Length: 2\r\n\r\nok' },
    ];

    it.each(bad)('$name → UPSTREAM_PROTOCOL, connection dropped, nothing delivered after it', async ({ bytes }) => {
      const srv = await startServer((req) => req.socket.write(req.index === 0 ? latin1(bytes) : reply('fine')));
      const pool = newPool(srv.origin);
      const rec = send(pool);
      expect(codeOf(await failed(rec))).toBe('UPSTREAM_PROTOCOL');
      // Not a connect or reset error: the forwarder must not retry it elsewhere as if nothing was sent.
      expect(isConnectError(rec.error)).toBe(false);
      expect(isResetBeforeAnswer(rec.error)).toBe(false);
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the bad connection to close');
      expect((await ok(send(pool))).body.toString()).toBe('fine');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('the largest chunk size it accepts (12 hex digits) has no precision loss: the body is counted, then cut', async () => {
      const srv = await startServer((req) => req.socket.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\nabc'));
      const pool = newPool(srv.origin);
      const rec = send(pool);
      expect(codeOf(await failed(rec))).toBe('UND_ERR_SOCKET');
      expect(rec.body.toString()).toBe('abc');
      await expectDrained(pool);
    });

    it('10,000 interim 100 Continue responses before the real one: skipped without recursion, response intact', async () => {
      const interim = 'HTTP/1.1 100 Continue\r\n\r\n'.repeat(10_000);
      const srv = await startServer((req) => req.socket.write(interim + 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
      const pool = newPool(srv.origin);
      const rec = await ok(send(pool));
      expect(rec.status).toBe(200);
      expect(rec.events.filter((e) => e === 'responseStart')).toEqual(['responseStart']);
      expect(rec.body.toString()).toBe('ok');
    });

    it('a second response glued to the first in one read is never handed to the next request', async () => {
      const smuggled = 'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled';
      const srv = await startServer((req) =>
        req.socket.write(req.index === 0 ? `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n${smuggled}` : reply('honest')),
      );
      const pool = newPool(srv.origin, 1);
      expect((await ok(send(pool))).body.toString()).toBe('ok');
      expect((await ok(send(pool))).body.toString()).toBe('honest');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });

    it('endless trailer lines never end the response and hold no memory past one line: an abort cleans up', async () => {
      let stop = false;
      const srv = await startServer((req) => {
        req.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n');
        const pump = (): void => {
          if (stop || req.socket.destroyed) return;
          req.socket.write('X-Trailer: 0123456789\r\n'.repeat(100), () => setImmediate(pump));
        };
        pump();
      });
      const pool = newPool(srv.origin);
      const rec = send(pool);
      await waitFor(() => srv.sockets[0] !== undefined && srv.sockets[0].bytesWritten > 200_000, '200 kB of trailers');
      expect(terminals(rec)).toEqual([]);
      expect(rec.body.toString()).toBe('ok');
      rec.controller!.abort(new Error('enough'));
      await failed(rec);
      stop = true;
      await expectDrained(pool);
    });
  });

  describe('H1Pool review: end, close and keep-alive races', () => {
    it('the server closing mid-head fails with a code the forwarder retries (nothing was answered)', async () => {
      const srv = await startServer((req) => req.socket.end('HTTP/1.1 200 OK\r\nContent-Len'));
      const pool = newPool(srv.origin);
      const rec = send(pool);
      const err = await failed(rec);
      expect(rec.status).toBe(0);
      expect(isResetBeforeAnswer(err)).toBe(true);
      await expectDrained(pool);
    });

    it('a request written on an idle socket whose FIN arrived but was not yet read fails with a retryable reset code', async () => {
      const srv = await startServer(echo);
      const pool = newPool(srv.origin, 1);
      await ok(send(pool, 'a'));
      let rec: Recorder | null = null;
      // Dispatch in the server's 'finish' callback: its FIN is sent, the pool's socket has not yet read it.
      srv.sockets[0]!.end(() => {
        rec = send(pool, 'b');
      });
      await waitFor(() => rec !== null, 'the dispatch');
      const err = await failed(rec!);
      expect(rec!.status).toBe(0);
      expect(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']).toContain(codeOf(err));
      expect(isResetBeforeAnswer(err)).toBe(true);
      await expectDrained(pool);
    });

    it('a close-delimited body ends cleanly on FIN, but an RST mid-body is an error', async () => {
      const srv = await startServer((req) => {
        if (req.index === 0) req.socket.end('HTTP/1.1 200 OK\r\n\r\nall');
        else {
          req.socket.write('HTTP/1.1 200 OK\r\n\r\npart', () => req.socket.resetAndDestroy());
        }
      });
      const pool = newPool(srv.origin);
      expect((await ok(send(pool))).body.toString()).toBe('all');
      const cut = send(pool);
      expect(codeOf(await failed(cut))).toBe('ECONNRESET');
      await expectDrained(pool);
    });

    it('a queued request is not written on a connection whose peer closed while the previous response was held by a pause', async () => {
      // The first response is complete and the server closes right after it (no `Connection: close`). The handler had
      // paused, so the pool holds the bytes and notes the close (peerEnded). On resume the response completes, the
      // connection is released as reusable (h1-pool.ts:334-336) and the queued request is started on the closed socket
      // (start() even resets peerEnded, h1-pool.ts:180): its write goes nowhere, no event ever comes, and the request
      // hangs while the dead connection stays counted (connected 1, busy 1) until the caller's own timer fires.
      let n = 0;
      const srv = await startServer((req) => (n++ === 0 ? req.socket.end(reply('first')) : echo(req, srv)));
      const pool = newPool(srv.origin, 1);
      const first = send(pool, 'a', { start: (c) => c.pause() });
      const queued = send(pool, 'b');
      await waitFor(() => first.status !== 0, 'the first response head');
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the server to close the first connection');
      await fewTurns();
      first.controller!.resume();
      expect((await ok(first)).body.toString()).toBe('first');
      // The queued request must settle: on a new connection (or at worst with a retryable reset error).
      expect(await settlesWithin(queued.done, 2000)).toBe(true);
      expect((await ok(queued)).body.toString()).toBe('b');
      await expectDrained(pool);
    });

    it('the same held close with nothing queued: the connection is dropped, not kept idle', async () => {
      const srv = await startServer((req) => (req.index === 0 ? req.socket.end(reply('first')) : echo(req, srv)));
      const pool = newPool(srv.origin, 1);
      const first = send(pool, 'a', { start: (c) => c.pause() });
      await waitFor(() => first.status !== 0, 'the first response head');
      await waitFor(() => srv.closed.has(srv.sockets[0]!), 'the server to close');
      await fewTurns();
      first.controller!.resume();
      await ok(first);
      await waitFor(() => pool.stats.connected === 0, 'the closed connection to be forgotten');
      expect((await ok(send(pool, 'b'))).body.toString()).toBe('b');
      expect(srv.requests.map((r) => r.conn)).toEqual([0, 1]);
    });
  });

  describe('H1Pool review: backpressure', () => {
    it('while paused the pool stops reading (the server sees backpressure); resume delivers every byte once', async () => {
      // Far more than loopback's socket buffers can absorb, so the server is left holding bytes while the pool is paused.
      const size = 32 * 1024 * 1024;
      const body = Buffer.alloc(size, 0x61);
      for (let i = 0; i < size; i += 4096) body[i] = 0x30 + ((i / 4096) % 10);
      const srv = await startServer((req) => req.socket.write(reply(body)));
      const pool = newPool(srv.origin);
      let received = 0;
      let paused = false;
      const rec = send(pool, 'x', {
        data: (c, chunk) => {
          received += chunk.length;
          if (received > 0 && !paused) {
            paused = true;
            c.pause();
          }
        },
      });
      await waitFor(() => paused, 'the first data');
      const before = received;
      await fewTurns();
      // Nothing more reached the handler, and the server still holds bytes it cannot send: the pool stopped reading
      // (it keeps at most the rest of one read, the kernel's buffers the rest).
      expect(received).toBe(before);
      expect(received).toBeLessThan(size);
      expect(srv.sockets[0]!.writableLength).toBeGreaterThan(0);
      rec.controller!.resume();
      await ok(rec);
      expect(rec.body.equals(body)).toBe(true);
      await waitFor(() => pool.stats.busy === 0, 'the connection back in the pool');
      expect(pool.stats).toEqual({ pending: 0, connected: 1, busy: 0 });
    });

    it('a handler that throws while resume() replays held bytes fails the exchange, as a throw during a read does', async () => {
      // h1-pool.ts:121: Exchange.resume calls conn.onData(held) without the try/catch of the socket's 'data' listener
      // (h1-pool.ts:162-167). The throw escapes to whoever called resume() (a 'drain' listener: an uncaught exception),
      // the held bytes are lost and the socket stays paused: the exchange never ends, the connection stays busy.
      const srv = await startServer((req) => req.socket.write(reply('held body')));
      const pool = newPool(srv.origin, 1);
      const bug = new Error('handler bug');
      const rec = send(pool, 'x', {
        start: (c) => c.pause(),
        data: () => {
          throw bug;
        },
      });
      await waitFor(() => rec.status !== 0, 'the head');
      await fewTurns();
      let thrown: unknown = null;
      try {
        rec.controller!.resume();
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeNull();
      expect(await settlesWithin(rec.done, 1000)).toBe(true);
      expect(rec.error).toBe(bug);
      await expectDrained(pool);
    });
  });

  describe('H1Pool review: origins', () => {
    it.skipIf(!hasIpv6Loopback)('an IPv6-literal origin (http://[::1]:port) is dialled at ::1', async () => {
      // h1-pool.ts:605 passes url.hostname, which keeps the brackets ("[::1]"); undici's Client strips them before it
      // calls the connector (undici lib/dispatcher/client.js, `if (hostname[0] === '[')`), so net.connect looks up the
      // name "[::1]" and every chat request fails with ENOTFOUND, while the health probes (undici) pass.
      const srv = await startServer(echo, { host: '::1' });
      expect(srv.origin.startsWith('http://[::1]:')).toBe(true);
      const pool = newPool(srv.origin);
      const rec = send(pool, 'v6');
      await rec.done;
      expect(rec.error).toBeNull();
      expect(rec.body.toString()).toBe('v6');
      expect(srv.requests[0]!.head.toLowerCase()).toContain(`\r\nhost: ${new URL(srv.origin).host}`);
    });

    describe('TLS (https origins through undici buildConnector, allowH2: false)', () => {
      it('keep-alive over one TLS connection, Content-Length and chunked, with SNI from the origin', async () => {
        const srv = await startTlsServer((req) =>
          req.socket.write(req.index === 0 ? reply(req.body) : latin1('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\ntls\r\n0\r\n\r\n')),
        );
        const pool = newPool(srv.origin);
        expect((await ok(send(pool, 'one'))).body.toString()).toBe('one');
        expect((await ok(send(pool, 'two'))).body.toString()).toBe('tls');
        expect(srv.sockets.length).toBe(1);
        expect((srv.sockets[0] as TLSSocket).servername).toBe('localhost');
        expect((srv.sockets[0] as TLSSocket).alpnProtocol).toBe('http/1.1');
        expect(srv.requests[0]!.head.toLowerCase()).toContain(`\r\nhost: ${new URL(srv.origin).host}`);
      });

      it('a close-delimited body over TLS ends cleanly; an idle TLS connection the server closes is forgotten', async () => {
        const srv = await startTlsServer((req) => (req.index === 0 ? req.socket.end('HTTP/1.1 200 OK\r\n\r\nuntil close') : echo(req, srv)));
        const pool = newPool(srv.origin);
        expect((await ok(send(pool))).body.toString()).toBe('until close');
        await waitFor(() => pool.stats.connected === 0, 'the closed TLS connection to be forgotten');
        expect((await ok(send(pool, 'b'))).body.toString()).toBe('b');
        srv.sockets[1]!.end();
        await waitFor(() => pool.stats.connected === 0, 'the idle TLS connection to be forgotten');
        expect((await ok(send(pool, 'c'))).body.toString()).toBe('c');
        expect(srv.requests.map((r) => r.conn)).toEqual([0, 1, 2]);
      });

      it('pause and resume over TLS hold and then deliver the body', async () => {
        const srv = await startTlsServer((req) => req.socket.write(reply('tls held body')));
        const pool = newPool(srv.origin);
        const rec = send(pool, 'x', { start: (c) => c.pause() });
        await waitFor(() => rec.status !== 0, 'the head');
        await fewTurns();
        expect(rec.events).toEqual(['requestStart', 'responseStart']);
        rec.controller!.resume();
        expect((await ok(rec)).body.toString()).toBe('tls held body');
      });

      it('a certificate the connector does not trust fails the request without retry codes', async () => {
        const srv = await startTlsServer(echo);
        // A connector without the test certificate's `ca`.
        const pool = poolMaker()(srv.origin, 1);
        const err = await failed(send(pool));
        expect(isConnectError(err)).toBe(false);
        expect(pool.stats).toEqual({ pending: 0, connected: 0, busy: 0 });
      });
    });
  });
});
