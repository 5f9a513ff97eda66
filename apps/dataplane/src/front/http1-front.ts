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
  readonly route: (url: string, headers: IncomingHttpHeaders) => R | null;
  /** Serves a request whose body (its Content-Length, as the front read it) has arrived. */
  readonly serve: (route: R, headers: IncomingHttpHeaders, res: FrontResponse, body: Buffer) => void;
  /** A connection's first request head was read (it is no longer an unused connection). */
  readonly onRequest?: (socket: Socket) => void;
}

export interface Front {
  /** Connections the front holds now. */
  size(): number;
  /** Connections it has handed to Node's HTTP server since it started. */
  handedOver(): number;
  /** Stops taking requests: idle connections close now, busy ones after their answer (with `Connection: close`). */
  close(): void;
  /** Closes the connections whose request's body is still coming (the drain time is over: it will not be answered). */
  dropUploads(): number;
}

/** Node's default `maxHeaderSize`: a longer head goes to Node's server, which refuses it (431). */
const MAX_HEAD_BYTES = 16 * 1024;
/** More header lines than this: Node's server takes the request. */
const MAX_HEADER_LINES = 64;
/** Bytes of pipelined requests kept while one is answered; past it the socket is paused until the answer ends. */
const MAX_PIPELINED_BYTES = 64 * 1024;
/** A Buffer body up to this size is copied into one buffer with its head or chunk framing; a larger one is written beside them. */
const COPY_MAX_BYTES = 16 * 1024;
/** How often timeouts are checked (keep-alive, head and body), as Node's server does with its own interval. */
const SWEEP_MS = 1000;

const CRLF2 = Buffer.from('\r\n\r\n', 'latin1');
/** The characters of a header name (RFC 9110 `tchar`). */
const TOKEN_CHAR = new Uint8Array(256);
for (const ch of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN_CHAR[ch.charCodeAt(0)] = 1;
/** A header value Node's `setHeader` accepts (`checkInvalidHeaderChar`). */
const VALID_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const DIGITS = /^[0-9]{1,10}$/;
/** The request line: an origin-form target of visible ASCII only (llhttp refuses other bytes in it). */
const REQUEST_LINE = /^POST (\/[\x21-\x7e]*) HTTP\/1\.1$/;

/** Header names whose semantics the front leaves to Node's server (framing, upgrades, Proxy-Connection as llhttp reads it); any repeated header goes there too. */
const HANDED_OVER = new Set(['transfer-encoding', 'expect', 'upgrade', 'te', 'trailer', 'http2-settings', 'proxy-connection']);

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

/**
 * The head's bytes hold no control character but tab and CRLF line ends (no bare CR or LF, no NUL, no DEL); the
 * loop is a third of the cost of regular expressions for the same checks.
 */
function plainBytes(buf: Buffer, end: number): boolean {
  for (let i = 0; i < end; i++) {
    const c = buf[i]!;
    if (c < 32) {
      if (c === 13 && buf[i + 1] === 10) i++;
      else if (c !== 9) return false;
    } else if (c === 127) return false;
  }
  return true;
}

/** The head's fields (`buf` up to `end`, the blank line's start), or null when the front does not take it. */
function parseHead(buf: Buffer, end: number): { url: string; headers: Record<string, string>; length: number; close: boolean } | null {
  if (!plainBytes(buf, end)) return null;
  const lines = buf.toString('latin1', 0, end).split('\r\n');
  if (lines.length > MAX_HEADER_LINES + 1) return null;
  const m = REQUEST_LINE.exec(lines[0]!);
  if (m === null) return null;
  const headers: Record<string, string> = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    // No name, or a folded line (it starts with a space or tab), or whitespace before the colon: not a token.
    if (colon <= 0) return null;
    let upper = false;
    for (let j = 0; j < colon; j++) {
      const c = line.charCodeAt(j);
      if (TOKEN_CHAR[c] !== 1) return null;
      if (c <= 90 && c >= 65) upper = true;
    }
    const name = line.slice(0, colon);
    const lower = upper ? name.toLowerCase() : name;
    // A repeat, or a name Object.prototype has (`constructor`, `__proto__`): Node's server merges or keeps them.
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
  // HTTP/1.1 requires exactly one Host (a repeat is handed over above); Node's server refuses a request without one.
  if (headers['host'] === undefined) return null;
  return { url: m[1]!, headers, length: Number(length), close };
}

/** `line` from `from` without the optional whitespace (spaces and tabs only, as llhttp) around a header value. */
function trimOws(line: string, from: number): string {
  let a = from;
  let b = line.length;
  while (a < b && (line.charCodeAt(a) === 32 || line.charCodeAt(a) === 9)) a++;
  while (b > a && (line.charCodeAt(b - 1) === 32 || line.charCodeAt(b - 1) === 9)) b--;
  return line.slice(a, b);
}

/** `POST /`: a buffer that does not start so is not the front's, and goes to Node's server at once. */
const POST_SLASH = Buffer.from('POST /', 'latin1');

/**
 * Bytes read and not yet taken, appended without copying the whole again per read (a client writing a byte at a time
 * must not cost the square of its bytes): the first read is kept as it is, later ones go into storage that doubles.
 */
class Bytes {
  view: Buffer | null = null;
  private store: Buffer | null = null;

  get length(): number {
    return this.view === null ? 0 : this.view.length;
  }

  append(chunk: Buffer): void {
    const view = this.view;
    if (view === null) {
      this.view = chunk;
      this.store = null;
      return;
    }
    const need = view.length + chunk.length;
    let store = this.store;
    // Owned storage holding the view at its start, with room: append in place.
    if (store === null || view.buffer !== store.buffer || view.byteOffset !== store.byteOffset || store.length < need) {
      store = Buffer.allocUnsafe(Math.max(need * 2, 4096));
      view.copy(store, 0);
      this.store = store;
    }
    chunk.copy(store, view.length);
    this.view = store.subarray(0, need);
  }

  /** Drops the first `n` bytes. */
  skip(n: number): void {
    const view = this.view!;
    this.view = n >= view.length ? null : view.subarray(n);
  }

  clear(): void {
    this.view = null;
    this.store = null;
  }
}

/** One client connection while the front owns it. */
class Connection {
  readonly socket: Socket;
  readonly front: FrontState;
  /** Bytes read and not yet taken: a head being read, or pipelined requests behind the one being answered. */
  readonly bytes = new Bytes();
  /** How far the search for the head's end has looked (it resumes there, less three bytes). */
  scanned = 0;
  /** A request whose head is read and whose body is still coming. */
  route: unknown = null;
  length = 0;
  headers: IncomingHttpHeaders | null = null;
  closeAfter = false;
  /**
   * The body so far: the read that held all of it (no copy, the common case), else one buffer the reads are copied
   * into (`copyIn`; a client writing a byte at a time must not make the node hold a buffer per read).
   */
  body: Buffer | null = null;
  received = 0;
  /** The head of the request whose body is coming: handed over with it if the request ends up Node's (cut short). */
  headBytes: Buffer | null = null;
  /** The answer being written. */
  res: FrontResponse | null = null;
  /** The sweep tick at which the current state (idle, or reading a request) began. */
  since: number;
  readingRequest = false;
  clientEnded = false;
  /** No more requests are read: the answer in progress is the last (Connection: close, a body error, closing). */
  ending = false;
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
    if (this.ending) return; // as llhttp after Connection: close, nothing more is read
    if (this.bytes.view === null && this.res === null && !this.readingRequest) {
      this.readingRequest = true;
      this.since = this.front.clock;
    }
    this.bytes.append(chunk);
    if (this.res !== null) {
      // Pipelined: kept until the answer in progress ends.
      if (this.bytes.length > MAX_PIPELINED_BYTES) this.socket.pause();
      return;
    }
    this.advance();
  };

  /** Takes what the buffer holds: the body in progress, then the next head (one request at a time). */
  advance(): void {
    for (;;) {
      const buf = this.bytes.view;
      if (buf === null) return;
      if (this.route !== null) {
        const want = this.length - this.received;
        const take = buf.length <= want ? buf : buf.subarray(0, want);
        if (this.received === 0 && take.length === this.length) this.body = take;
        else this.copyIn(take);
        this.received += take.length;
        if (take === buf) this.bytes.clear();
        else this.bytes.skip(want);
        if (this.received === this.length) this.start();
        return;
      }
      // Not a POST: Node's server at once (it answers GETs and refuses garbage without waiting for more).
      if (buf.compare(POST_SLASH, 0, Math.min(6, buf.length), 0, Math.min(6, buf.length)) !== 0) {
        this.handOver();
        return;
      }
      const end = buf.indexOf(CRLF2, Math.max(0, this.scanned - 3));
      if (end < 0) {
        this.scanned = buf.length;
        if (buf.length > MAX_HEAD_BYTES) this.handOver();
        return;
      }
      this.scanned = 0;
      if (end + 4 > MAX_HEAD_BYTES) {
        this.handOver();
        return;
      }
      if (!this.sawRequest) {
        this.sawRequest = true;
        this.front.opts.onRequest?.(this.socket);
      }
      const head = parseHead(buf, end);
      const route = head === null ? null : this.front.opts.route(head.url, head.headers);
      if (head === null || route === null) {
        this.handOver();
        return;
      }
      // The body is framed by the Content-Length the front parsed itself, whatever the route made of it.
      this.route = route;
      this.length = head.length;
      this.headers = head.headers;
      this.closeAfter = head.close;
      this.received = 0;
      this.headBytes = buf.subarray(0, end + 4);
      this.bytes.skip(end + 4);
    }
  }

  /**
   * Appends a read to the body buffer, grown by doubling (from 16 KiB) up to the Content-Length: memory follows the
   * bytes received, not the length a head promised.
   */
  copyIn(take: Buffer): void {
    const need = this.received + take.length;
    let body = this.body;
    if (body === null || body.length < need) {
      const grown = Buffer.allocUnsafe(Math.min(this.length, Math.max(need * 2, 16 * 1024)));
      if (body !== null) body.copy(grown, 0, 0, this.received);
      this.body = body = grown;
    }
    take.copy(body, this.received);
  }

  /** The body is all here: the answer begins. */
  start(): void {
    const route = this.route;
    const body = this.body === null ? Buffer.alloc(0) : this.body.length === this.length ? this.body : this.body.subarray(0, this.length);
    const headers = this.headers!;
    this.route = null;
    this.headers = null;
    this.headBytes = null;
    this.body = null;
    this.readingRequest = false;
    const close = this.closeAfter || this.front.closing;
    if (close) this.stopReading();
    const res = new FrontResponse(this, headers, close);
    this.res = res;
    this.front.opts.serve(route, headers, res, body);
  }

  /** This connection's answer in progress is its last: bytes that come after it are dropped. */
  stopReading(): void {
    this.ending = true;
    this.bytes.clear();
  }

  /** `res` has written its last bytes: the next request, or the end of the connection. */
  finished(res: FrontResponse): void {
    if (this.res !== res) return;
    this.res = null;
    this.since = this.front.clock;
    res.writableFinished = true;
    res.closed();
    if (this.gone) return;
    if (res.closeConnection || this.clientEnded || this.front.closing) {
      this.stopReading();
      this.socket.destroySoon();
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
    if (this.bytes.view !== null) {
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
    front.handedOver++;
    // A request whose body is still coming goes over whole: its head and what came of its body, then the rest.
    const parts = this.route !== null && this.headBytes !== null ? [this.headBytes] : [];
    if (parts.length > 0 && this.body !== null) parts.push(this.body.subarray(0, this.received));
    if (this.bytes.view !== null) parts.push(this.bytes.view);
    const buf = parts.length === 0 ? null : parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    this.route = null;
    this.headBytes = null;
    this.body = null;
    this.bytes.clear();
    if (socket.isPaused()) socket.resume();
    front.nodeListener.call(front.opts.server, socket);
    if (buf !== null) socket.emit('data', buf);
    if (this.clientEnded) socket.emit('end');
  }

  readonly onEnd = (): void => {
    this.clientEnded = true;
    if (this.ending) return; // the answer in progress closes the connection
    if (this.res === null && (this.route !== null || this.bytes.view !== null)) {
      // A request cut short: Node's server gets its bytes and the end, and says what is wrong (400).
      this.handOver();
      return;
    }
    // As Node's server (unless `httpAllowHalfOpen`): the client's end ends the connection, an answer under way included.
    if (this.res === null || (this.front.opts.server as Server & { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen !== true) {
      this.stopReading();
      this.socket.end();
    }
  };

  readonly onClose = (): void => {
    this.gone = true;
    this.front.connections.delete(this);
    this.body = null;
    this.bytes.clear();
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
    const { server } = this.front.opts;
    if (this.res !== null) {
      // An answer that can no longer be written (the socket ended under it) will not finish: the connection goes.
      if (!this.socket.writable) this.socket.destroy();
      return;
    }
    const waited = (clock - this.since) * SWEEP_MS;
    if (this.readingRequest || !this.sawRequest) {
      const limit = this.route === null ? server.headersTimeout : server.requestTimeout;
      if (limit > 0 && waited > limit) {
        // What Node's server does with its own timed-out requests: its clientError listener (Fastify's handler) answers 408.
        if (this.readingRequest) {
          this.stopReading();
          const err = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
          if (server.listenerCount('clientError') > 0) server.emit('clientError', err, this.socket);
          else this.socket.destroy();
        } else this.socket.destroy();
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
  handedOver: number;
}

/** Bytes 0x80-0xff: a head holding them is written as Latin-1 on its own (Node writes heads as Latin-1). */
const HIGH_BYTES = /[\x80-\xff]/;

/**
 * The client side of one request served by the front: what `ClientResponse` names, written straight to the socket
 * (the head with the first bytes; a body without a length as chunks, each in one write). As Node's `ServerResponse`:
 * `writeHead` fixes the head (headers can no longer be set; no Content-Length means chunked), and an `end(body)`
 * with no head yet sends the body's length.
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
  /** The head, fixed by `writeHead` and not written yet. */
  private pendingHead: string | null = null;
  private names: Record<string, string> = {};
  private values: Record<string, number | string | readonly string[]> = {};
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
    if (this.headersSent) throw Object.assign(new Error('Cannot write headers after they are sent to the client'), { code: 'ERR_HTTP_HEADERS_SENT' });
    this.statusCode = status;
    if (headers !== undefined) for (const name in headers) if (headers[name] !== undefined) this.setHeader(name, headers[name]);
    this.pendingHead = this.head(null);
    return this;
  }

  /** The head, once: `Content-Length` when set (or `bodyLength` for an answer ended whole), else chunked. */
  private head(bodyLength: number | null): string {
    this.headersSent = true;
    const { names, values } = this;
    if (values['content-length'] === undefined && bodyLength !== null) values['content-length'] = bodyLength;
    this.chunkedEncoding = values['content-length'] === undefined;
    const connection = values['connection'];
    if ((typeof connection === 'string' && connection.toLowerCase() === 'close') || this.conn.front.closing) this.closeConnection = true;
    if (this.closeConnection) this.conn.stopReading();
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

  /** The head still to write (fixed by `writeHead`, or made now without a length), or ''. */
  private takeHead(bodyLength: number | null): string {
    const pending = this.pendingHead;
    if (pending !== null) {
      this.pendingHead = null;
      return pending;
    }
    return this.headersSent ? '' : this.head(bodyLength);
  }

  flushHeaders(): void {
    if (this.writableEnded) return;
    const head = this.takeHead(null);
    if (head !== '') this.send(head, 'latin1', null);
  }

  write(chunk: string | Buffer, encoding: BufferEncoding = 'utf8'): boolean {
    if (this.writableEnded) return false;
    const head = this.takeHead(null);
    // An empty chunk would read as the body's end ('0' CRLF CRLF): as Node, nothing goes but a head not yet out.
    if (chunk.length === 0) return head === '' ? true : this.send(head, 'latin1', null);
    if (!this.chunkedEncoding) return this.send(head, encoding, chunk);
    return this.send(head + frameStart(chunk, encoding), encoding, chunk, '\r\n');
  }

  end(chunk?: string | Buffer, encoding: BufferEncoding = 'utf8'): this {
    if (this.writableEnded) return this;
    this.writableEnded = true;
    const head = this.takeHead(chunk === undefined ? 0 : typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk.length);
    if (!this.chunkedEncoding) this.send(head, encoding, chunk ?? null, '', this.onFinish);
    else if (chunk === undefined || chunk.length === 0) this.send(`${head}0\r\n\r\n`, 'latin1', null, '', this.onFinish);
    else this.send(head + frameStart(chunk, encoding), encoding, chunk, '\r\n0\r\n\r\n', this.onFinish);
    return this;
  }

  destroy(): this {
    this.conn.socket.destroy();
    return this;
  }

  /** `text` (ASCII but a head's Latin-1 values), then `body`, then `tail` (ASCII): one socket write where they join. */
  private send(text: string, encoding: BufferEncoding, body: string | Buffer | null, tail = '', done?: (err?: Error | null) => void): boolean {
    const socket = this.conn.socket;
    if (this.conn.gone || !socket.writable) return false;
    let out: string | Buffer;
    if (body === null) out = text + tail;
    else if (typeof body === 'string') {
      if (encoding !== 'latin1' && encoding !== 'binary' && HIGH_BYTES.test(text)) {
        socket.cork();
        socket.write(text, 'latin1');
        const more = done === undefined ? socket.write(body + tail, encoding) : socket.write(body + tail, encoding, done);
        socket.uncork();
        return more;
      }
      out = text + body + tail;
    } else if (body.length <= COPY_MAX_BYTES) {
      out = Buffer.allocUnsafe(text.length + body.length + tail.length);
      out.write(text, 0, 'latin1');
      body.copy(out, text.length);
      out.write(tail, text.length + body.length, 'latin1');
    } else {
      socket.cork();
      if (text.length > 0) socket.write(text, 'latin1');
      if (tail.length > 0) socket.write(body);
      const last = tail.length > 0 ? Buffer.from(tail, 'latin1') : body;
      const more = done === undefined ? socket.write(last) : socket.write(last, done);
      socket.uncork();
      return more;
    }
    const enc = typeof out === 'string' && body === null ? 'latin1' : encoding;
    return done === undefined ? socket.write(out, enc) : socket.write(out, enc, done);
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
  const state: FrontState = { opts: opts as unknown as FrontOptions<unknown>, connections: new Set(), nodeListener, clock: 0, closing: false, handedOver: 0 };
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
    handedOver: () => state.handedOver,
    close() {
      state.closing = true;
      // A busy one ends after its answer (`finished`), as does one whose body is coming; a head that comes from now on
      // is handed over (the route refuses it while closing), and Fastify answers it 503.
      for (const c of state.connections) if (c.res === null && c.route === null && c.bytes.view === null) c.socket.destroy();
    },
    dropUploads() {
      let n = 0;
      for (const c of state.connections)
        if (c.route !== null && c.res === null) {
          c.socket.destroy();
          n++;
        }
      return n;
    },
  };
}
