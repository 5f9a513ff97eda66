import { EventEmitter } from 'node:events';
import { STATUS_CODES } from 'node:http';
import type { IncomingHttpHeaders, OutgoingHttpHeaders, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { ClientResponse } from './client-response.ts';

/**
 * The node's own HTTP/1.1 server side for plain chat requests, in front of Node's HTTP server (issue 12, "a lighter
 * node"). It takes each new connection from the listening server and reads its requests itself while they are plain
 * chat requests: `POST`, HTTP/1.1, a head of well-formed lines without repeated names, a Content-Length body and
 * nothing that needs HTTP machinery (no Transfer-Encoding, Expect, Upgrade or Connection options but keep-alive and
 * close). Those are answered on a `FrontResponse` without Node's parser, request and response streams or their
 * per-request objects. Anything else (another route, a method, a malformed or unusual head, HTTP/1.0) hands the
 * connection, with the bytes read so far, to Node's HTTP server, which owns it from then on: it parses, refuses and
 * routes exactly as if the front were not there. So the front needs to be right only about what it takes, and it
 * takes only what it has checked completely.
 */
export interface FrontOptions<R> {
  /** The listening HTTP server (Fastify's): its own connection handling takes what the front hands over. */
  readonly server: Server;
  /** The route of a POST with this URL and headers when the front serves it, else null (handed to Node's server). */
  readonly route: (url: string, headers: IncomingHttpHeaders) => (R & { readonly length: number }) | null;
  /** Serves a request whose body (`route(...).length` bytes) has arrived. */
  readonly serve: (route: R, headers: IncomingHttpHeaders, res: FrontResponse, body: Buffer) => void;
  /** A connection's first request head was read (it is no longer an unused connection). */
  readonly onRequest?: (socket: Socket) => void;
}

export interface Front {
  /** Connections the front holds now. */
  size(): number;
  /** Stops taking requests: idle connections close now, busy ones after their answer (with `Connection: close`). */
  close(): void;
}

/** Node's default `maxHeaderSize`: a longer head goes to Node's server, which refuses it (431). */
const MAX_HEAD_BYTES = 16 * 1024;
/** More header lines than this: Node's server takes the request. */
const MAX_HEADER_LINES = 64;
/** Bytes of pipelined requests kept while one is answered; past it the socket is paused until the answer ends. */
const MAX_PIPELINED_BYTES = 64 * 1024;
/** How often timeouts are checked (keep-alive, head and body), as Node's server does with its own interval. */
const SWEEP_MS = 1000;

const CRLF2 = Buffer.from('\r\n\r\n', 'latin1');
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A control character other than tab, CR and LF anywhere in the head: not ours. */
// eslint-disable-next-line no-control-regex -- the point is to find control characters
const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/;
/** A CR not followed by LF, or an LF not preceded by CR: not ours. */
const BARE_CR_LF = /\r(?!\n)|(?<!\r)\n/;
/** A header value Node's `setHeader` accepts (`checkInvalidHeaderChar`). */
const VALID_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const DIGITS = /^[0-9]{1,10}$/;
const REQUEST_LINE = /^POST (\/[^ ]*) HTTP\/1\.1$/;

/** Header names that must not come twice (and nothing is gained by merging the others): any repeat goes to Node. */
const HANDED_OVER = new Set(['transfer-encoding', 'expect', 'upgrade', 'te', 'trailer', 'http2-settings']);

let dateSecond = 0;
let dateText = '';
/** The `Date` header's value, made once a second as Node's server does. */
function httpDate(): string {
  const now = Date.now();
  const second = now - (now % 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/** The head's fields, or null when the front does not take it (then Node's server reads it again from the start). */
function parseHead(text: string): { url: string; headers: Record<string, string>; close: boolean } | null {
  if (CONTROL.test(text) || BARE_CR_LF.test(text)) return null;
  const lines = text.split('\r\n');
  if (lines.length > MAX_HEADER_LINES + 1) return null;
  const m = REQUEST_LINE.exec(lines[0]!);
  if (m === null) return null;
  const headers: Record<string, string> = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) return null; // no name, or a folded line (it starts with a space or tab)
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) return null; // whitespace before the colon included
    const lower = name.toLowerCase();
    // A repeat, or a name Object.prototype has (\`constructor\`, \`__proto__\`): Node's server merges or keeps them.
    if (lower in headers || HANDED_OVER.has(lower)) return null;
    headers[lower] = trimOws(line, colon + 1);
  }
  let close = false;
  const connection = headers['connection'];
  if (connection !== undefined) {
    const c = connection.toLowerCase();
    if (c === 'close') close = true;
    else if (c !== 'keep-alive') return null;
  }
  const length = headers['content-length'];
  if (length === undefined || !DIGITS.test(length)) return null;
  return { url: m[1]!, headers, close };
}

/** `line` from `from` without the optional whitespace (spaces and tabs only, as llhttp) around a header value. */
function trimOws(line: string, from: number): string {
  let a = from;
  let b = line.length;
  while (a < b && (line.charCodeAt(a) === 32 || line.charCodeAt(a) === 9)) a++;
  while (b > a && (line.charCodeAt(b - 1) === 32 || line.charCodeAt(b - 1) === 9)) b--;
  return line.slice(a, b);
}

/** One client connection while the front owns it. */
class Connection {
  readonly socket: Socket;
  readonly front: FrontState;
  /** Bytes read and not yet taken: a head being read, or pipelined requests behind the one being answered. */
  buf: Buffer | null = null;
  /** A request whose head is read and whose body is still coming. */
  route: unknown = null;
  length = 0;
  headers: IncomingHttpHeaders | null = null;
  closeAfter = false;
  body: Buffer[] = [];
  received = 0;
  /** The answer being written. */
  res: FrontResponse | null = null;
  /** The sweep tick at which the current state (idle, or reading a request) began. */
  since: number;
  readingRequest = false;
  clientEnded = false;
  gone = false;
  sawRequest = false;

  constructor(socket: Socket, front: FrontState) {
    this.socket = socket;
    this.front = front;
    this.since = front.clock;
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('error', this.onError);
    socket.on('drain', this.onDrain);
  }

  readonly onData = (chunk: Buffer): void => {
    if (this.buf === null) {
      this.buf = chunk;
      if (this.res === null && !this.readingRequest) {
        this.readingRequest = true;
        this.since = this.front.clock;
      }
    } else this.buf = Buffer.concat([this.buf, chunk]);
    if (this.res !== null) {
      // Pipelined: kept until the answer in progress ends.
      if (this.buf.length > MAX_PIPELINED_BYTES) this.socket.pause();
      return;
    }
    this.advance();
  };

  /** Takes what the buffer holds: the body in progress, then the next head (one request at a time). */
  advance(): void {
    for (;;) {
      const buf = this.buf;
      if (buf === null) return;
      if (this.route !== null) {
        const want = this.length - this.received;
        if (buf.length <= want) {
          this.body.push(buf);
          this.received += buf.length;
          this.buf = null;
        } else {
          this.body.push(buf.subarray(0, want));
          this.received += want;
          this.buf = buf.subarray(want);
        }
        if (this.received === this.length) this.start();
        return;
      }
      const end = buf.indexOf(CRLF2);
      if (end < 0) {
        if (buf.length > MAX_HEAD_BYTES) this.handOver();
        return;
      }
      if (end + 4 > MAX_HEAD_BYTES) {
        this.handOver();
        return;
      }
      if (!this.sawRequest) {
        this.sawRequest = true;
        this.front.opts.onRequest?.(this.socket);
      }
      const head = parseHead(buf.toString('latin1', 0, end));
      const route = head === null ? null : this.front.opts.route(head.url, head.headers);
      if (head === null || route === null || route.length !== Number(head.headers['content-length'])) {
        this.handOver();
        return;
      }
      this.route = route;
      this.length = route.length;
      this.headers = head.headers;
      this.closeAfter = head.close;
      this.received = 0;
      this.buf = end + 4 === buf.length ? null : buf.subarray(end + 4);
    }
  }

  /** The body is all here: the answer begins. */
  start(): void {
    const route = this.route;
    const body = this.body.length === 1 ? this.body[0]! : Buffer.concat(this.body, this.length);
    const headers = this.headers!;
    this.route = null;
    this.headers = null;
    this.body = [];
    this.readingRequest = false;
    const res = new FrontResponse(this, headers, this.closeAfter || this.front.closing);
    this.res = res;
    this.front.opts.serve(route, headers, res, body);
  }

  /** `res` has written its last bytes: the next request, or the end of the connection. */
  finished(res: FrontResponse): void {
    if (this.res !== res) return;
    this.res = null;
    this.since = this.front.clock;
    res.writableFinished = true;
    res.emit('finish');
    res.closed();
    if (this.gone) return;
    if (res.closeConnection || this.clientEnded || this.front.closing) {
      this.socket.end();
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
    if (this.buf !== null) {
      this.readingRequest = true;
      this.advance();
    }
  }

  /**
   * Gives the connection to Node's HTTP server with the bytes read and not taken, as if it had read them itself: its
   * connection listener is called as on a new connection and the bytes are handed to its parser before any others.
   */
  handOver(): void {
    const { socket, front } = this;
    socket.off('data', this.onData);
    socket.off('end', this.onEnd);
    socket.off('close', this.onClose);
    socket.off('error', this.onError);
    socket.off('drain', this.onDrain);
    front.connections.delete(this);
    const buf = this.buf;
    this.buf = null;
    if (socket.isPaused()) socket.resume();
    front.nodeListener.call(front.opts.server, socket);
    if (buf !== null) socket.emit('data', buf);
    if (this.clientEnded) socket.emit('end');
  }

  readonly onEnd = (): void => {
    this.clientEnded = true;
    if (this.res === null && (this.route !== null || this.buf !== null)) {
      // A request cut short: Node's server says so (400) or drops it.
      this.handOver();
      return;
    }
    // As Node's server (unless `httpAllowHalfOpen`): the client's end ends the connection, an answer under way included.
    if (this.res === null || (this.front.opts.server as Server & { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen !== true) this.socket.end();
  };

  readonly onClose = (): void => {
    this.gone = true;
    this.front.connections.delete(this);
    this.body = [];
    this.buf = null;
    const res = this.res;
    this.res = null;
    res?.closed();
  };

  readonly onError = (): void => {
    // ECONNRESET and the like: 'close' follows.
  };

  readonly onDrain = (): void => {
    this.res?.emit('drain');
  };

  /** Sweep: drops idle connections past the keep-alive timeout and requests slower than Node's server allows. */
  sweep(clock: number): void {
    if (this.res !== null) return;
    const { server } = this.front.opts;
    const waited = (clock - this.since) * SWEEP_MS;
    if (this.readingRequest || !this.sawRequest) {
      const limit = this.route === null ? server.headersTimeout : server.requestTimeout;
      if (limit > 0 && waited > limit) {
        if (this.sawRequest) this.socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        this.socket.destroySoon();
      }
      return;
    }
    const keepAlive = server.keepAliveTimeout;
    if (keepAlive > 0 && waited > keepAlive) this.socket.destroy();
  }
}

interface FrontState {
  readonly opts: FrontOptions<unknown>;
  readonly connections: Set<Connection>;
  readonly nodeListener: (this: Server, socket: Socket) => void;
  clock: number;
  closing: boolean;
}

/**
 * The client side of one request served by the front: what `ClientResponse` names, written straight to the socket
 * (the head with the first bytes; a body without a length as chunks, each in one write).
 */
export class FrontResponse extends EventEmitter implements ClientResponse {
  readonly conn: Connection;
  readonly req: { readonly headers: IncomingHttpHeaders };
  statusCode = 200;
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  chunkedEncoding = false;
  closeConnection: boolean;
  private names: Record<string, string> = {};
  private values: Record<string, number | string | readonly string[]> = {};
  private hasLength = false;
  private isClosed = false;
  /** The last write's callback: finished, unless it failed (the socket's 'close' then says the client has gone). */
  private readonly onFinish = (err?: Error | null): void => {
    if (err === undefined || err === null) this.conn.finished(this);
  };

  constructor(conn: Connection, headers: IncomingHttpHeaders, closeConnection: boolean) {
    super();
    this.conn = conn;
    this.req = { headers };
    this.closeConnection = closeConnection;
  }

  /** Chunks go through `write`, which frames each in one socket write itself. */
  get socket(): null {
    return null;
  }

  setHeader(name: string, value: number | string | readonly string[]): this {
    if (this.headersSent) throw Object.assign(new Error('Cannot set headers after they are sent to the client'), { code: 'ERR_HTTP_HEADERS_SENT' });
    const lower = name.toLowerCase();
    if (typeof value === 'string' ? !VALID_VALUE.test(value) : Array.isArray(value) && value.some((v: string) => !VALID_VALUE.test(v))) {
      throw Object.assign(new TypeError(`Invalid character in header content ["${name}"]`), { code: 'ERR_INVALID_CHAR' });
    }
    this.names[lower] = name;
    this.values[lower] = value;
    return this;
  }

  getHeader(name: string): number | string | string[] | undefined {
    const v = this.values[name.toLowerCase()];
    return Array.isArray(v) ? [...(v as string[])] : (v as number | string | undefined);
  }

  writeHead(status: number, headers?: OutgoingHttpHeaders): this {
    this.statusCode = status;
    if (headers !== undefined) for (const name in headers) if (headers[name] !== undefined) this.setHeader(name, headers[name]);
    return this;
  }

  /** The head, once: `Content-Length` when set (or `bodyLength` for an answer ended whole), else chunked. */
  private head(bodyLength: number | null): string {
    this.headersSent = true;
    const { names, values } = this;
    const lenSet = values['content-length'];
    if (lenSet === undefined && bodyLength !== null) values['content-length'] = bodyLength;
    this.hasLength = values['content-length'] !== undefined;
    this.chunkedEncoding = !this.hasLength;
    const connection = values['connection'];
    if ((typeof connection === 'string' && connection.toLowerCase() === 'close') || this.conn.front.closing) this.closeConnection = true;
    let head = `HTTP/1.1 ${this.statusCode} ${STATUS_CODES[this.statusCode] ?? 'unknown'}\r\n`;
    for (const lower in values) {
      if (lower === 'connection') continue;
      const v = values[lower]!;
      const name = names[lower] ?? lower;
      if (Array.isArray(v)) for (const one of v as string[]) head += `${name}: ${one}\r\n`;
      else head += `${name}: ${v as string | number}\r\n`;
    }
    head += `Date: ${httpDate()}\r\n`;
    const server = this.conn.front.opts.server;
    head += this.closeConnection ? 'Connection: close\r\n' : `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(server.keepAliveTimeout / 1000)}\r\n`;
    if (this.chunkedEncoding) head += 'Transfer-Encoding: chunked\r\n';
    return `${head}\r\n`;
  }

  flushHeaders(): void {
    if (this.headersSent || this.writableEnded) return;
    this.send(this.head(null), 'latin1', null);
  }

  write(chunk: string | Buffer, encoding: BufferEncoding = 'utf8'): boolean {
    if (this.writableEnded) return false;
    const head = this.headersSent ? '' : this.head(null);
    if (!this.chunkedEncoding) return this.send(head, encoding, chunk);
    return this.send(head + frameStart(chunk, encoding), encoding, chunk, '\r\n');
  }

  end(chunk?: string | Buffer, encoding: BufferEncoding = 'utf8'): this {
    if (this.writableEnded) return this;
    this.writableEnded = true;
    let head = '';
    if (!this.headersSent) head = this.head(chunk === undefined ? 0 : typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk.length);
    if (!this.chunkedEncoding) this.send(head, encoding, chunk ?? null, '', this.onFinish);
    else if (chunk === undefined || chunk.length === 0) this.send(`${head}0\r\n\r\n`, 'latin1', null, '', this.onFinish);
    else this.send(head + frameStart(chunk, encoding), encoding, chunk, '\r\n0\r\n\r\n', this.onFinish);
    return this;
  }

  /** `text` (ASCII), then `body`, then `tail` (ASCII), in one socket write when they can be joined. */
  private send(text: string, encoding: BufferEncoding, body: string | Buffer | null, tail = '', done?: () => void): boolean {
    const socket = this.conn.socket;
    if (this.conn.gone || !socket.writable) return false;
    if (body === null || typeof body === 'string') {
      const all = body === null ? text + tail : text + body + tail;
      return done === undefined ? socket.write(all, encoding) : socket.write(all, encoding, done);
    }
    socket.cork();
    if (text.length > 0) socket.write(text, 'latin1');
    let more = tail.length > 0 ? socket.write(body) : done === undefined ? socket.write(body) : socket.write(body, done);
    if (tail.length > 0) more = done === undefined ? socket.write(tail, 'latin1') : socket.write(tail, 'latin1', done);
    socket.uncork();
    return more;
  }

  /** The answer is done (`writableFinished`) or the client has gone: 'close', once. */
  closed(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.emit('close');
  }
}

/** A chunk's size line. */
function frameStart(chunk: string | Buffer, encoding: BufferEncoding): string {
  const n = typeof chunk === 'string' ? (encoding === 'latin1' || encoding === 'binary' ? chunk.length : Buffer.byteLength(chunk, encoding)) : chunk.length;
  return `${n.toString(16)}\r\n`;
}

/**
 * Puts the front before `server`'s own connection handling. Call it once, before anything else listens for the
 * server's connections.
 */
export function installFront<R>(opts: FrontOptions<R>): Front {
  const { server } = opts;
  const [nodeListener] = server.listeners('connection') as ((this: Server, socket: Socket) => void)[];
  if (nodeListener === undefined) throw new Error('installFront: the server has no connection listener of its own');
  server.off('connection', nodeListener);
  // The routes the front keeps are opaque to it: `route` makes them, `serve` takes them back.
  const state: FrontState = { opts: opts as unknown as FrontOptions<unknown>, connections: new Set(), nodeListener, clock: 0, closing: false };
  const sweep = setInterval(() => {
    const clock = ++state.clock;
    for (const c of state.connections) c.sweep(clock);
  }, SWEEP_MS);
  sweep.unref();
  server.once('close', () => clearInterval(sweep));
  server.prependListener('connection', (socket: Socket) => {
    if (state.closing) {
      nodeListener.call(server, socket);
      return;
    }
    state.connections.add(new Connection(socket, state));
  });
  return {
    size: () => state.connections.size,
    close() {
      state.closing = true;
      // A busy one ends after its answer (`finished`); one reading a request gets Fastify's 503 for it (handed over).
      for (const c of state.connections) if (c.res === null && c.route === null && c.buf === null) c.socket.destroy();
    },
  };
}
