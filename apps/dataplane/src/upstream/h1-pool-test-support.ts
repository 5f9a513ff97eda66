import type { IncomingHttpHeaders } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect } from 'vitest';
import { buildConnector } from 'undici';
import { H1Pool, type H1Connector, type H1Controller, type H1Handler, type H1Head, type H1PoolOptions } from './h1-pool.ts';
import { chatConnector } from './upstream-pools.ts';

// Test support for h1-pool.test.ts and h1-pool-faults.test.ts (not loaded by the data plane): raw TCP servers on
// loopback that write exact response bytes, pools dialled through undici's connector as upstream-pools.ts builds
// them, and a handler that records every callback. Each test file calls `afterEach(closeAll)`.

/** One request as the server read it off the wire. */
export interface SeenRequest {
  /** Its place among all the requests the server read. */
  readonly index: number;
  /** Which server-side connection (in accept order) carried it. */
  readonly conn: number;
  /** The request line and header lines, without the blank line. */
  readonly head: string;
  readonly body: Buffer;
  readonly socket: Socket;
}

export interface TestServer {
  readonly origin: string;
  readonly sockets: Socket[];
  readonly closed: Set<Socket>;
  readonly requests: SeenRequest[];
  /** Every byte read from any connection. */
  bytesIn: number;
}

export type Responder = (req: SeenRequest, srv: TestServer) => void;

const servers: Server[] = [];
const serverSockets: Socket[] = [];
const pools: H1Pool[] = [];

/** Destroys every pool and server-side socket the helpers made and closes their servers (run after each test). */
export async function closeAll(): Promise<void> {
  for (const pool of pools.splice(0)) await pool.destroy();
  for (const s of serverSockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((srv) => new Promise<void>((resolve) => srv.close(() => resolve()))));
}

/** A server's state before it listens (its `origin` is set once it does). */
export const newServerState = (): TestServer => ({ origin: '', sockets: [], closed: new Set(), requests: [], bytesIn: 0 });

/**
 * Takes one accepted connection: reads requests (Content-Length bodies) off it and hands each to `respond`, which
 * writes bytes. `onConnection` sees the socket first; if it destroys it, nothing is read.
 */
export function serve(state: TestServer, socket: Socket, respond: Responder, onConnection?: (socket: Socket) => void): void {
  const conn = state.sockets.length;
  state.sockets.push(socket);
  serverSockets.push(socket);
  // Each write goes out at once (no Nagle delay), so split writes reach the pool as separate reads.
  socket.setNoDelay(true);
  socket.on('close', () => state.closed.add(socket));
  socket.on('error', () => {});
  if (onConnection !== undefined) {
    onConnection(socket);
    if (socket.destroyed) return;
  }
  let buf = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    state.bytesIn += chunk.length;
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.toString('latin1', 0, end);
      const m = /\r\ncontent-length: *(\d+)/i.exec(head);
      const length = m === null ? 0 : Number(m[1]);
      if (buf.length < end + 4 + length) return;
      const body = Buffer.from(buf.subarray(end + 4, end + 4 + length));
      buf = buf.subarray(end + 4 + length);
      const req: SeenRequest = { index: state.requests.length, conn, head, body, socket };
      state.requests.push(req);
      respond(req, state);
    }
  });
}

/** Listens on an ephemeral port of `host`, closed by closeAll(); resolves to the port. */
export async function listen(srv: Server, host: string): Promise<number> {
  servers.push(srv);
  await new Promise<void>((resolve) => srv.listen(0, host, () => resolve()));
  return (srv.address() as AddressInfo).port;
}

export interface ServerOptions {
  /** The address to listen on (an IPv6 literal goes into the origin in brackets). */
  host?: string;
  /** Sees each accepted socket before any request is read (see serve()). */
  onConnection?: (socket: Socket) => void;
}

/** A raw HTTP/1.1 server: parses requests (Content-Length bodies) and hands each to `respond`, which writes bytes. */
export async function startServer(respond: Responder, { host = '127.0.0.1', onConnection }: ServerOptions = {}): Promise<TestServer> {
  const state = newServerState();
  const srv = createServer((socket) => serve(state, socket, respond, onConnection));
  const port = await listen(srv, host);
  const h = host.includes(':') ? `[${host}]` : host;
  return Object.assign(state, { origin: `http://${h}:${port}` });
}

/** An origin nothing listens on (bound, then released). */
export async function deadOrigin(): Promise<string> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', () => resolve()));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

export type NewPool = (origin: string, connections?: number, extra?: Partial<H1PoolOptions>) => H1Pool;

/**
 * How the pools under test read a plain-HTTP response: into the pool's shared buffer, as the data plane dials
 * (upstream-pools.ts `chatConnector`), or through the socket's own stream (as every TLS connection reads). Each test
 * file runs its tests in both (`describe.each(READ_MODES)`, `useReadMode` in a `beforeAll`).
 */
export type ReadMode = 'shared-buffer' | 'stream';
export const READ_MODES: readonly ReadMode[] = ['shared-buffer', 'stream'];
let readMode: ReadMode = 'shared-buffer';
export function useReadMode(mode: ReadMode): void {
  readMode = mode;
}

/** A newPool() whose connector also trusts `tls.ca` (for https origins with a test certificate). */
export function poolMaker(tls: { ca?: string } = {}): NewPool {
  return (origin, connections = 4, extra = {}) => {
    const options = { timeout: 2000, allowH2: false, ...tls };
    const connect = readMode === 'shared-buffer' ? chatConnector(options) : (buildConnector(options) as unknown as H1Connector);
    const pool = new H1Pool(origin, { connections, connect, ...extra });
    pools.push(pool);
    return pool;
  };
}

/** A pool for `origin` (destroyed by closeAll()). */
export const newPool: NewPool = poolMaker();

/** Order in which recorders reached their end (or error), across a test. */
let finishSeq = 0;

export interface Hooks {
  request?: (c: H1Controller) => void;
  start?: (c: H1Controller, head: H1Head) => void;
  data?: (c: H1Controller, chunk: Buffer) => void;
  /** Runs after the end is recorded and `done` settles. */
  end?: (c: H1Controller) => void;
  /** Runs after the error is recorded and `done` settles. */
  error?: (c: H1Controller, err: Error) => void;
}

/** Records every handler callback; `done` settles on onResponseEnd or onResponseError. */
export class Recorder implements H1Handler {
  controller: H1Controller | null = null;
  status = 0;
  statusMessage = '';
  head: H1Head | null = null;
  readonly chunks: Buffer[] = [];
  trailers: IncomingHttpHeaders | null = null;
  error: Error | null = null;
  readonly events: string[] = [];
  finishedAs = 0;
  readonly done: Promise<void>;
  private finish!: () => void;
  private readonly hooks: Hooks;

  constructor(hooks: Hooks = {}) {
    this.hooks = hooks;
    this.done = new Promise((resolve) => (this.finish = resolve));
  }

  get body(): Buffer {
    return Buffer.concat(this.chunks);
  }

  get settled(): boolean {
    return this.finishedAs > 0;
  }

  onRequestStart(controller: H1Controller): void {
    this.controller = controller;
    this.events.push('requestStart');
    this.hooks.request?.(controller);
  }

  onResponseStart(controller: H1Controller, head: H1Head): void {
    this.events.push('responseStart');
    this.head = head;
    this.status = head.status;
    this.statusMessage = head.statusMessage;
    this.hooks.start?.(controller, head);
  }

  onResponseData(controller: H1Controller, chunk: Buffer): void {
    this.events.push('data');
    this.chunks.push(Buffer.from(chunk));
    this.hooks.data?.(controller, chunk);
  }

  onResponseEnd(controller: H1Controller, trailers: IncomingHttpHeaders): void {
    this.events.push('end');
    this.trailers = trailers;
    this.finishedAs = ++finishSeq;
    this.finish();
    this.hooks.end?.(controller);
  }

  onResponseError(controller: H1Controller, err: Error): void {
    this.events.push('error');
    this.error = err;
    this.finishedAs = ++finishSeq;
    this.finish();
    this.hooks.error?.(controller, err);
  }
}

export const codeOf = (err: Error | null): unknown => (err as { code?: unknown } | null)?.code;

/** Dispatches a POST to /v1/chat/completions with a handler that records it. */
export function send(pool: H1Pool, body: string | Buffer = 'x', hooks: Hooks = {}, headers: Record<string, string> = {}): Recorder {
  const rec = new Recorder(hooks);
  pool.dispatch({ path: '/v1/chat/completions', method: 'POST', headers, body }, rec);
  return rec;
}

/** The terminal callbacks heard so far ('end' or 'error'). */
export const terminals = (rec: Recorder): string[] => rec.events.filter((e) => e === 'end' || e === 'error');

/** Waits for a response that must succeed; exactly one terminal callback. */
export async function ok(rec: Recorder): Promise<Recorder> {
  await rec.done;
  expect(rec.error).toBeNull();
  expect(terminals(rec)).toEqual(['end']);
  return rec;
}

/** Waits for a response that must fail; exactly one terminal callback, no end. */
export async function failed(rec: Recorder): Promise<Error> {
  await rec.done;
  expect(terminals(rec)).toEqual(['error']);
  return rec.error!;
}

/** Polls `cond` until it holds, failing after the deadline. */
export async function waitFor(cond: () => boolean, what: string, timeoutMs = 2000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Whether `p` settles within `ms` (a deadline for something that must happen, never a wait for it). */
export const settlesWithin = (p: Promise<unknown>, ms: number): Promise<boolean> =>
  Promise.race([p.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms).unref())]);

/** A few event-loop turns with the socket readable: only for checks that something did NOT happen. */
export const fewTurns = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 25));

/** Resolves once `bytes` have been handed to the kernel (on loopback: readable by the pool's socket). */
export const write = (socket: Socket, bytes: string | Buffer): Promise<void> =>
  new Promise((resolve) => socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes, () => resolve()));

/** Writes `parts` one socket.write each, with a timer turn between so the pool reads them separately. */
export function writeParts(socket: Socket, parts: Buffer[]): void {
  let i = 0;
  const step = (): void => {
    if (socket.destroyed) return;
    socket.write(parts[i++]!);
    if (i < parts.length) setTimeout(step, 1);
  };
  step();
}

export const bytesOf = (buf: Buffer): Buffer[] => [...buf].map((b) => Buffer.from([b]));
export const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');

/** A Content-Length response echoing `body`. */
export const reply = (body: string | Buffer = 'ok', extraHead = ''): Buffer => {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  return Buffer.concat([latin1(`HTTP/1.1 200 OK\r\n${extraHead}Content-Length: ${b.length}\r\n\r\n`), b]);
};
export const echo: Responder = (req) => req.socket.write(reply(req.body));
