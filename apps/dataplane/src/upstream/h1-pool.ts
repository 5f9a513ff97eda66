import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';

/**
 * The chat request's HTTP/1.1 client: one origin, a capped set of keep-alive connections, a FIFO queue when all
 * are busy, one request per connection at a time (no pipelining). It does only what a POST to a model runtime
 * needs, with undici's handler interface (`onRequestStart` ... `onResponseEnd`) so the forwarder is the same
 * whichever client carries it. Dialling (timeouts, TLS, the address guard) is undici's connector, passed in; plain-HTTP
 * sockets dialled with `CHAT_ONREAD` read into one shared buffer (upstream-pools.ts `chatConnector`).
 *
 * Why not undici's Pool: per request it cost about 30 µs of JavaScript on the node's hot path (request object,
 * header validation, the llhttp wasm parser and its callbacks, kResume's queue scan) against about 8 here, which
 * is a fifth of the node's whole cost per request (bench/RESULTS.md, seventh session). Health probes and metrics
 * scrapes (rare GETs) still use undici.
 *
 * Responses are parsed strictly (RFC 9112): a status line and header fields within 64 KiB, no obsolete line folding,
 * one Content-Length (or several equal ones), Transfer-Encoding chunked (then any Content-Length is ignored and the
 * connection not reused), else the body runs to the close; 1xx interim responses are skipped, 101 is an error (never
 * asked for). Anything else malformed fails the request with `UPSTREAM_PROTOCOL` and the connection is dropped.
 */

export interface H1Controller {
  readonly aborted: boolean;
  abort(reason: Error): void;
  pause(): void;
  resume(): void;
}

export interface H1Handler {
  onRequestStart(controller: H1Controller, context: unknown): void;
  onResponseStart(controller: H1Controller, head: H1Head): void;
  /** `chunk` is the handler's own (a connection that reads into the shared buffer hands out copies). */
  onResponseData(controller: H1Controller, chunk: Buffer): void;
  onResponseEnd(controller: H1Controller, trailers: IncomingHttpHeaders): void;
  onResponseError(controller: H1Controller, err: Error): void;
}

export interface H1Request {
  readonly path: string;
  readonly method: 'POST';
  /** Lower-case names; values must not hold CR, LF or NUL (checked). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | Buffer;
}

/** undici's connector signature (`buildConnector`, `guardConnector`). */
export type H1Connector = (
  options: { hostname: string; host: string; protocol: string; port: string; servername: string | null; localAddress: null; httpSocket?: undefined },
  callback: (err: Error | null, socket: Socket | null) => void,
) => unknown;

export interface H1PoolOptions {
  readonly connections: number;
  readonly connect: H1Connector;
  /** Longest a connection stays idle (default 30 s; lowered by a `Keep-Alive: timeout=` hint less 1 s). */
  readonly keepAliveTimeout?: number;
}

export class UpstreamProtocolError extends Error {
  readonly code = 'UPSTREAM_PROTOCOL';
}

/** Errors with undici's codes, so the forwarder's mapping (retry elsewhere, 502/503) reads them the same. */
const codedError = (message: string, code: string): Error => Object.assign(new Error(message), { code });

const MAX_HEAD = 64 * 1024;
/** Bytes read ahead for a paused handler before the socket stops reading (a socket stream's usual high-water mark). */
const HOLD_MAX = 64 * 1024;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
const isSpace = (c: number): boolean => c === 32 || c === 9;
const DIGITS = /^\d{1,15}$/;

/**
 * Plain-HTTP chat connections read into this one buffer (`net.connect`'s `onread`, `CHAT_ONREAD`): no buffer is
 * allocated per read (Node's default read allocates 64 KiB, trims it to the bytes read and hands it to the
 * garbage collector) and no stream machinery runs per read (`push`, `read`, the `data` event). Bytes kept past the
 * read (a body part for the handler, a partial line, bytes held for a paused handler) are copied out of it; small
 * copies come from Node's 8 KiB buffer pool. JavaScript is single-threaded and a read's callback parses all of it
 * before it returns, so one buffer serves every connection.
 */
const READ_BUFFER = Buffer.allocUnsafeSlow(64 * 1024);

/** The connection a socket carries (set when the pool takes the socket). */
const CONN = Symbol('h1-conn');
type ConnSocket = Socket & { [CONN]?: Conn };

/** A read into `READ_BUFFER`: parsed now, on the connection the socket belongs to. */
function onSharedRead(this: ConnSocket, nread: number, buf: Buffer): boolean {
  const conn = this[CONN];
  // Bytes before the pool took the socket cannot be a response to anything (the request is written after).
  if (conn === undefined) {
    this.destroy();
    return false;
  }
  conn.read(buf.subarray(0, nread));
  return true; // the connection pauses the socket itself (`hold`, past HOLD_MAX)
}

/**
 * The `onread` option for the chat pool's plain-HTTP connector (`buildConnector({ ..., onread: CHAT_ONREAD })`):
 * sockets it makes read into the shared buffer. Not for TLS sockets, which read through their own stream.
 */
export const CHAT_ONREAD = Object.freeze({ buffer: READ_BUFFER, callback: onSharedRead as (nread: number, buf: Buffer) => boolean });

/** `part` to keep past the read: a copy when it is a view of the shared read buffer (from Node's pool when small). */
function kept(part: Buffer): Buffer {
  if (part.buffer !== READ_BUFFER.buffer) return part;
  const copy = Buffer.allocUnsafe(part.length);
  part.copy(copy, 0, 0, part.length);
  return copy;
}

/** Where a connection's parser is. */
const Phase = { Idle: 0, Head: 1, Length: 2, ChunkSize: 3, ChunkData: 4, ChunkDataEnd: 5, Trailers: 6, UntilClose: 7 } as const;

/** One request on its way: queued, or on a connection. */
class Exchange implements H1Controller {
  aborted = false;
  conn: Conn | null = null;
  paused = false;
  done = false;
  readonly pool: H1Pool;
  /** Null once written: the pool keeps no request body longer than the write. */
  req: H1Request | null;
  readonly handler: H1Handler;

  constructor(pool: H1Pool, req: H1Request, handler: H1Handler) {
    this.pool = pool;
    this.req = req;
    this.handler = handler;
  }

  abort(reason: Error): void {
    if (this.aborted || this.done) return;
    this.aborted = true;
    const conn = this.conn;
    if (conn !== null) conn.fail(reason);
    else {
      this.pool.unqueue(this);
      this.finishError(reason);
    }
  }

  /** Bytes that come while paused wait on the connection (`Conn.hold`), up to a cap; then the socket stops reading. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    const conn = this.conn;
    if (conn === null) return;
    // Bytes that came while paused (the rest of the read being parsed, and any read ahead) go first.
    const parts = conn.held;
    if (parts !== null) {
      conn.held = null;
      conn.heldBytes = 0;
      const held = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
      try {
        conn.onData(held);
      } catch (err) {
        // As for a throw during a read: the exchange fails, the connection goes.
        conn.fail(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      if (conn.peerEnded && conn.held === null && !conn.closed) conn.onEnd();
    }
    if (!this.paused && this.conn === conn) conn.socket.resume();
  }

  finishError(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.handler.onResponseError(this, err);
  }
}

const NO_TRAILERS: IncomingHttpHeaders = Object.freeze({}) as IncomingHttpHeaders;

/** One keep-alive connection and its response parser. */
class Conn {
  readonly pool: H1Pool;
  readonly socket: Socket;
  ex: Exchange | null = null;
  phase: number = Phase.Idle;
  /** Bytes of a head (or a chunk-size line, or trailers) split across reads. */
  carry: Buffer | null = null;
  /** Bytes that came while the handler was paused, in order (`Exchange.resume` parses them; `hold`), and their total. */
  held: Buffer[] | null = null;
  heldBytes = 0;
  /** The peer closed while bytes were held: the close is acted on once they are parsed. */
  peerEnded = false;
  remaining = 0;
  reusable = true;
  idleSince = 0;
  idleMs: number;
  closed = false;
  /** Given back to the pool since its last response. */
  free = true;

  constructor(pool: H1Pool, socket: Socket) {
    this.pool = pool;
    this.socket = socket;
    this.idleMs = pool.keepAliveTimeout;
    // A socket made with CHAT_ONREAD reads into the shared buffer (`read` is called with a view of it); any other
    // (TLS, or a connector without it) emits its own buffers.
    (socket as ConnSocket)[CONN] = this;
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('error', (err: Error) => this.fail(err));
    socket.on('close', () => this.onEnd());
  }

  start(ex: Exchange): void {
    this.ex = ex;
    ex.conn = this;
    this.free = false;
    this.phase = Phase.Head;
    this.held = null;
    this.heldBytes = 0;
    this.peerEnded = false;
    this.reusable = true;
    const req = ex.req!;
    ex.req = null;
    const body = req.body;
    const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    let head = `${req.method} ${req.path} HTTP/1.1\r\nhost: ${this.pool.hostHeader}\r\nconnection: keep-alive\r\n`;
    for (const name in req.headers) head += `${name}: ${req.headers[name]}\r\n`;
    head += `content-length: ${length}\r\n\r\n`;
    this.socket.resume();
    if (typeof body === 'string') this.socket.write(head + body);
    else {
      this.socket.cork();
      this.socket.write(head, 'latin1');
      this.socket.write(body);
      this.socket.uncork();
    }
  }

  /** One read's bytes. */
  read(chunk: Buffer): void {
    if (this.held !== null) {
      // The handler is paused with bytes waiting: these come after them.
      this.hold(chunk);
      return;
    }
    try {
      this.onData(chunk);
    } catch (err) {
      // A handler that threw: the exchange fails and the connection (out of step now) goes, as in undici.
      this.fail(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** The connection is lost or unusable: the exchange on it (if any) fails, the pool forgets it. */
  fail(err: Error): void {
    if (!this.closed) {
      this.closed = true;
      this.socket.destroy();
      this.pool.dropped(this);
    }
    const ex = this.ex;
    if (ex === null) return;
    this.ex = null;
    ex.conn = null;
    ex.finishError(err);
  }

  onEnd(): void {
    // Bytes held for a paused handler came before the close: they are parsed first (`Exchange.resume`).
    if (this.held !== null && !this.closed) {
      this.peerEnded = true;
      return;
    }
    // The peer finished sending: a body delimited by the close ends cleanly; any other response still being read is
    // cut; an idle connection goes.
    const ex = this.ex;
    if (ex !== null && this.phase === Phase.UntilClose) {
      this.ex = null;
      ex.conn = null;
      ex.done = true;
      this.fail(codedError('other side closed', 'UND_ERR_SOCKET'));
      ex.handler.onResponseEnd(ex, NO_TRAILERS);
      return;
    }
    this.fail(codedError('other side closed', 'UND_ERR_SOCKET'));
  }

  protocolError(why: string): void {
    this.fail(new UpstreamProtocolError(`malformed response from the runtime: ${why}`));
  }

  onData(chunk: Buffer): void {
    let buf = chunk;
    let at = 0;
    while (at < buf.length) {
      const ex = this.ex;
      if (this.closed) return;
      if (ex === null) {
        // Bytes with no request waiting for them (idle, or past a complete response): the connection is out of step.
        this.protocolError('bytes outside a response');
        return;
      }
      if (ex.paused) {
        // The handler asked for no more data for now: the rest of this read waits on the connection.
        this.hold(at === 0 ? buf : buf.subarray(at));
        return;
      }
      switch (this.phase) {
        case Phase.Head: {
          if (this.carry !== null) {
            buf = Buffer.concat([this.carry, at === 0 ? buf : buf.subarray(at)]);
            at = 0;
            this.carry = null;
          }
          const end = buf.indexOf(CRLFCRLF, at);
          if (end < 0) {
            if (buf.length - at > MAX_HEAD) return this.protocolError('head over 64 KiB');
            this.carry = Buffer.from(buf.subarray(at));
            return;
          }
          if (end - at > MAX_HEAD) return this.protocolError('head over 64 KiB');
          if (!this.head(buf.toString('latin1', at, end))) return;
          at = end + 4;
          break;
        }
        case Phase.Length: {
          const n = Math.min(this.remaining, buf.length - at);
          this.remaining -= n;
          const part = at === 0 && n === buf.length ? buf : buf.subarray(at, at + n);
          at += n;
          ex.handler.onResponseData(ex, kept(part));
          if (this.remaining === 0 && this.ex === ex && !this.closed) this.complete();
          break;
        }
        case Phase.ChunkSize:
        case Phase.Trailers: {
          const nl = buf.indexOf(10, at);
          if (nl < 0) {
            this.carryLine(buf, at);
            return;
          }
          let line: string;
          if (this.carry !== null) {
            line = Buffer.concat([this.carry, buf.subarray(at, nl)]).toString('latin1');
            this.carry = null;
          } else line = buf.toString('latin1', at, nl);
          at = nl + 1;
          if (this.phase === Phase.Trailers) {
            // Trailer fields are read and ignored, up to the empty line that ends the response.
            if (line === '' || line === '\r') this.complete();
            break;
          }
          const size = chunkSize(line);
          if (size < 0) return this.protocolError('bad chunk size');
          if (size === 0) this.phase = Phase.Trailers;
          else {
            this.remaining = size;
            this.phase = Phase.ChunkData;
          }
          break;
        }
        case Phase.ChunkData: {
          const n = Math.min(this.remaining, buf.length - at);
          this.remaining -= n;
          const part = buf.subarray(at, at + n);
          at += n;
          if (this.remaining === 0) {
            this.phase = Phase.ChunkDataEnd;
            this.remaining = 2;
          }
          ex.handler.onResponseData(ex, kept(part));
          break;
        }
        case Phase.ChunkDataEnd: {
          // The CRLF after a chunk's data, possibly split across reads.
          if (buf[at] !== (this.remaining === 2 ? 13 : 10)) return this.protocolError('chunk not followed by CRLF');
          at++;
          if (--this.remaining === 0) this.phase = Phase.ChunkSize;
          break;
        }
        case Phase.UntilClose: {
          const part = at === 0 ? buf : buf.subarray(at);
          at = buf.length;
          ex.handler.onResponseData(ex, kept(part));
          break;
        }
        default:
          return this.protocolError('bytes outside a response');
      }
    }
    // A response completed in this read: the connection is free for the next request (nothing may follow it).
    if (this.ex === null && !this.closed && this.phase === Phase.Idle && !this.free) {
      this.free = true;
      // Not after a close that came while the handler held the bytes: that socket is gone.
      if (this.reusable && !this.peerEnded && !this.socket.destroyed) this.pool.release(this);
      else this.fail(codedError('connection: close', 'UND_ERR_SOCKET'));
    }
  }

  /**
   * Keeps bytes for a paused handler (`Exchange.resume` parses them). Up to HOLD_MAX is read ahead, as a socket's
   * stream buffers up to its high-water mark, so a close that follows a response is seen while paused (`peerEnded`);
   * past it the socket stops reading and the runtime feels the backpressure.
   */
  hold(part: Buffer): void {
    // Kept as a list (joined once, on resume): appending read by read would copy what is held over again each time.
    const copy = kept(part);
    if (this.held === null) this.held = [copy];
    else this.held.push(copy);
    this.heldBytes += copy.length;
    if (this.heldBytes >= HOLD_MAX) this.socket.pause();
  }

  /** Keeps a partial line for the next read (bounded). */
  carryLine(buf: Buffer, at: number): void {
    const part = buf.subarray(at);
    const next = this.carry === null ? Buffer.from(part) : Buffer.concat([this.carry, part]);
    if (next.length > 8192) this.protocolError('line over 8 KiB');
    else this.carry = next;
  }

  /** Parses a response head (without its final CRLFCRLF); false when the connection failed. */
  head(text: string): boolean {
    const ex = this.ex!;
    // One pass over the characters (no regular expressions, no string per field): a NUL, or a CR or LF that is not part
    // of a CRLF, anywhere in the head is refused outright (no lenient line endings).
    const len = text.length;
    let eol = text.indexOf('\r\n');
    if (eol < 0) eol = len;
    // HTTP/1.1 200 OK (the reason phrase may be empty or absent)
    const minor = text.charCodeAt(7);
    const c0 = text.charCodeAt(9);
    const c1 = text.charCodeAt(10);
    const c2 = text.charCodeAt(11);
    if (
      eol < 12 ||
      !text.startsWith('HTTP/1.') ||
      (minor !== 49 && minor !== 48) ||
      text.charCodeAt(8) !== 32 ||
      !(c0 >= 49 && c0 <= 57 && c1 >= 48 && c1 <= 57 && c2 >= 48 && c2 <= 57) ||
      (eol > 12 && text.charCodeAt(12) !== 32) ||
      !plainText(text, 12, eol)
    ) {
      this.protocolError('bad status line');
      return false;
    }
    const status = (c0 - 48) * 100 + (c1 - 48) * 10 + (c2 - 48);
    let contentLength = -1;
    let chunked = false;
    let hasTransferEncoding = false;
    let connectionClose = minor === 48;
    for (let pos = eol + 2; pos < len;) {
      // The name: token characters up to the colon (whitespace before it, or a folded line, is not a token).
      let colon = pos;
      for (let c = text.charCodeAt(colon); c < 128 && TOKEN_CHARS[c] === 1; c = text.charCodeAt(colon)) colon++;
      if (colon === pos || text.charCodeAt(colon) !== 58) {
        this.protocolError('bad header line');
        return false;
      }
      // The value: up to a CR that an LF follows (or the head's end).
      let next = colon + 1;
      for (let c = text.charCodeAt(next); next < len && c !== 13 && c !== 10 && c !== 0; c = text.charCodeAt(next)) next++;
      if (next < len && (text.charCodeAt(next) !== 13 || text.charCodeAt(next + 1) !== 10)) {
        this.protocolError('bad line ending or NUL in head');
        return false;
      }
      const nameLength = colon - pos;
      const line = pos;
      pos = next + 2;
      // Only the framing fields are read here (by length first: no string for the others); `H1Head.get` reads the rest.
      if (nameLength !== 14 && nameLength !== 17 && nameLength !== 10) continue;
      const name = text.slice(line, colon).toLowerCase();
      const value = fieldValue(text, colon + 1, next);
      if (name === 'content-length') {
        if (!DIGITS.test(value) || (contentLength >= 0 && contentLength !== Number(value))) {
          this.protocolError('bad content-length');
          return false;
        }
        contentLength = Number(value);
      } else if (name === 'transfer-encoding') {
        hasTransferEncoding = true;
        if (value === 'chunked') chunked = true;
        else {
          const codings = value.toLowerCase().split(',');
          chunked = codings[codings.length - 1]!.trim() === 'chunked';
        }
      } else if (name === 'connection') {
        const v = value.toLowerCase();
        if (v.includes('close')) connectionClose = true;
        else if (minor === 48 && v.includes('keep-alive')) connectionClose = false;
      } else if (name === 'keep-alive') {
        const m = /timeout=(\d+)/i.exec(value);
        if (m !== null) this.idleMs = Math.min(this.pool.keepAliveTimeout, Math.max(0, Number(m[1]) * 1000 - 1000));
      }
    }
    if (status < 200) {
      if (status === 101) {
        this.protocolError('unexpected 101 switching protocols');
        return false;
      }
      return true; // interim (100 Continue, 103 Early Hints): the real response follows
    }
    this.reusable = !connectionClose;
    if (status === 204 || status === 304) this.phase = Phase.Idle;
    else if (hasTransferEncoding) {
      // A body framed by a coding other than chunked runs to the close; either way the length header is void (and a
      // response that sent both is not trusted with the next request).
      if (!chunked || contentLength >= 0) this.reusable = false;
      this.phase = chunked ? Phase.ChunkSize : Phase.UntilClose;
    } else if (contentLength >= 0) {
      this.phase = contentLength === 0 ? Phase.Idle : Phase.Length;
      this.remaining = contentLength;
    } else {
      this.phase = Phase.UntilClose;
      this.reusable = false;
    }
    ex.handler.onResponseStart(ex, new H1Head(status, text, eol));
    if (this.ex !== ex || this.closed) return false; // the handler aborted
    if (this.phase === Phase.Idle) this.complete();
    return true;
  }

  /** The response is whole: the handler hears its end; `onData` then frees the connection (or closes it). */
  complete(): void {
    const ex = this.ex!;
    this.ex = null;
    ex.conn = null;
    ex.done = true;
    this.phase = Phase.Idle;
    this.carry = null;
    ex.handler.onResponseEnd(ex, NO_TRAILERS);
  }
}

/** Field-name characters (RFC 9110 token), by character code. */
const TOKEN_CHARS = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") TOKEN_CHARS[c.charCodeAt(0)] = 1;

/** A field name: one or more token characters. */
function isToken(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 128 || TOKEN_CHARS[c] !== 1) return false;
  }
  return true;
}

/** A request field value: visible ASCII, spaces and tabs (so the head's bytes are the same whatever the body's encoding). */
function isFieldValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 32 && c !== 9) || c > 126) return false;
  }
  return true;
}

/** A request target: `/` then visible ASCII only (no spaces, controls or bytes a field could be smuggled in with). */
function isPath(path: string): boolean {
  if (path.charCodeAt(0) !== 47) return false;
  for (let i = 1; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c < 33 || c > 126) return false;
  }
  return true;
}

/** No NUL, CR or LF in [start, end). */
function plainText(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === 0 || c === 10 || c === 13) return false;
  }
  return true;
}

/** A field's value without its surrounding whitespace. */
function fieldValue(text: string, start: number, end: number): string {
  while (start < end && isSpace(text.charCodeAt(start))) start++;
  while (end > start && isSpace(text.charCodeAt(end - 1))) end--;
  return text.slice(start, end);
}

/** A response's status and header fields, read from its head on demand (a response's handler asks for one or two). */
export class H1Head {
  readonly status: number;
  private readonly text: string;
  private readonly eol: number;

  constructor(status: number, text: string, eol: number) {
    this.status = status;
    this.text = text;
    this.eol = eol;
  }

  /** The status line's reason phrase. */
  get statusMessage(): string {
    return this.eol > 13 ? this.text.slice(13, this.eol) : '';
  }

  /** The first field named `name` (lower case), or undefined. */
  get(name: string): string | undefined {
    const text = this.text;
    for (let pos = this.eol + 2; pos < text.length;) {
      let next = text.indexOf('\r\n', pos);
      if (next < 0) next = text.length;
      const colon = text.indexOf(':', pos);
      if (colon - pos === name.length && text.slice(pos, colon).toLowerCase() === name) return fieldValue(text, colon + 1, next);
      pos = next + 2;
    }
    return undefined;
  }
}

/** Parses `1a;ext=1\r` (a chunk-size line without its LF); -1 when malformed. */
function chunkSize(line: string): number {
  let end = line.length;
  if (end > 0 && line.charCodeAt(end - 1) === 13) end--;
  const semi = line.indexOf(';');
  if (semi >= 0 && semi < end) end = semi;
  let size = 0;
  let i = 0;
  // trailing whitespace before an extension is tolerated (BWS)
  while (end > 0 && (line.charCodeAt(end - 1) === 32 || line.charCodeAt(end - 1) === 9)) end--;
  if (end === 0 || end > 12) return -1;
  for (; i < end; i++) {
    const c = line.charCodeAt(i);
    const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
    if (d < 0) return -1;
    size = size * 16 + d;
  }
  return size;
}

export class H1Pool {
  readonly origin: string;
  readonly hostHeader: string;
  private readonly dialHost: string;
  readonly keepAliveTimeout: number;
  private readonly connections: number;
  private readonly connect: H1Connector;
  private readonly url: URL;
  /** Idle connections, the most recently used last. */
  private idle: Conn[] = [];
  private readonly all = new Set<Conn>();
  private connecting = 0;
  private queue: Exchange[] = [];
  private queueHead = 0;
  private closing = false;
  private destroyed = false;
  private sweepTimer: NodeJS.Timeout | null = null;
  private closeWaiters: (() => void)[] = [];

  constructor(origin: string, opts: H1PoolOptions) {
    this.url = new URL(origin);
    if (this.url.protocol !== 'http:' && this.url.protocol !== 'https:') throw new Error(`unsupported upstream protocol ${this.url.protocol}`);
    this.origin = this.url.origin;
    this.hostHeader = this.url.host;
    // An IPv6 literal is dialled without its brackets (as undici's Client does).
    const h = this.url.hostname;
    this.dialHost = h.startsWith('[') ? h.slice(1, -1) : h;
    this.connections = opts.connections;
    this.connect = opts.connect;
    this.keepAliveTimeout = opts.keepAliveTimeout ?? 30_000;
  }

  /** As undici's `Pool.stats`: `pending` is requests waiting for a connection. */
  get stats(): { readonly pending: number; readonly connected: number; readonly busy: number } {
    return { pending: this.queue.length - this.queueHead, connected: this.all.size, busy: this.all.size - this.idle.length };
  }

  dispatch(req: H1Request, handler: H1Handler): void {
    const ex = new Exchange(this, req, handler);
    let invalid: string | null = isPath(req.path) ? null : 'invalid request path';
    for (const name in req.headers) {
      if (!isFieldValue(req.headers[name]!) || !isToken(name)) invalid ??= `invalid header ${name}`;
    }
    if (invalid !== null) {
      ex.done = true;
      handler.onRequestStart(ex, null);
      handler.onResponseError(ex, codedError(invalid, 'UND_ERR_INVALID_ARG'));
      return;
    }
    handler.onRequestStart(ex, null);
    if (ex.aborted) return;
    if (this.closing || this.destroyed) {
      ex.finishError(codedError('the pool is closed', this.destroyed ? 'UND_ERR_DESTROYED' : 'UND_ERR_CLOSED'));
      return;
    }
    const conn = this.takeIdle();
    if (conn !== null) conn.start(ex);
    else {
      this.queue.push(ex);
      this.grow();
    }
  }

  /** The most recently used idle connection that has not outlived its keep-alive time. */
  private takeIdle(): Conn | null {
    const now = performance.now();
    while (this.idle.length > 0) {
      const conn = this.idle.pop()!;
      if (now - conn.idleSince < conn.idleMs && !conn.socket.destroyed) return conn;
      conn.closed = true;
      conn.socket.destroy();
      this.all.delete(conn);
    }
    return null;
  }

  /** Opens connections for queued requests, up to the cap. */
  private grow(): void {
    while (this.queue.length - this.queueHead > this.connecting && this.all.size + this.connecting < this.connections) {
      this.connecting++;
      this.dial();
    }
  }

  private dial(): void {
    try {
      this.connect(
        { hostname: this.dialHost, host: this.url.host, protocol: this.url.protocol, port: this.url.port, servername: null, localAddress: null },
        (err, socket) => {
          this.connecting--;
          if (err !== null || socket === null) {
            // The request that asked for this connection fails; others wait for theirs.
            const ex = this.shift();
            if (ex !== null) ex.finishError(err ?? new Error('connect failed'));
            if (this.destroyed) return;
            this.grow();
            if (this.closing) this.settleClose();
            return;
          }
          if (this.destroyed) {
            socket.destroy();
            return;
          }
          const conn = new Conn(this, socket);
          this.all.add(conn);
          this.next(conn);
        },
      );
    } catch (err) {
      this.connecting--;
      const ex = this.shift();
      if (ex !== null) ex.finishError(err instanceof Error ? err : new Error(String(err)));
      if (this.closing) this.settleClose();
    }
  }

  private shift(): Exchange | null {
    if (this.queueHead >= this.queue.length) return null;
    const ex = this.queue[this.queueHead]!;
    this.queue[this.queueHead++] = undefined as never;
    if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.queueHead);
      this.queueHead = 0;
    }
    return ex;
  }

  unqueue(ex: Exchange): void {
    const i = this.queue.indexOf(ex, this.queueHead);
    if (i >= 0) this.queue.splice(i, 1);
  }

  /** A free connection takes the next queued request, or waits idle. */
  private next(conn: Conn): void {
    const ex = this.shift();
    if (ex !== null) {
      conn.start(ex);
      return;
    }
    if (this.closing) {
      conn.closed = true;
      conn.socket.destroy();
      this.all.delete(conn);
      this.settleClose();
      return;
    }
    conn.idleSince = performance.now();
    conn.socket.resume(); // an idle socket must see the peer's close
    this.idle.push(conn);
    this.sweepSoon();
  }

  release(conn: Conn): void {
    this.next(conn);
  }

  dropped(conn: Conn): void {
    this.all.delete(conn);
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    if (this.destroyed) return;
    this.grow();
    if (this.closing) this.settleClose();
  }

  /** Closes idle connections past their keep-alive time (one timer per pool, not per connection). */
  private sweepSoon(): void {
    if (this.sweepTimer !== null) return;
    this.sweepTimer = setTimeout(() => {
      this.sweepTimer = null;
      const now = performance.now();
      const keep: Conn[] = [];
      for (const conn of this.idle) {
        if (now - conn.idleSince < conn.idleMs) keep.push(conn);
        else {
          conn.closed = true;
          conn.socket.destroy();
          this.all.delete(conn);
        }
      }
      this.idle = keep;
      if (keep.length > 0) this.sweepSoon();
    }, 1000);
    this.sweepTimer.unref();
  }

  /** Finishes the requests it carries and queues, then closes every connection. */
  close(): Promise<void> {
    if (this.destroyed) return Promise.resolve();
    this.closing = true;
    for (const conn of this.idle) {
      conn.closed = true;
      conn.socket.destroy();
      this.all.delete(conn);
    }
    this.idle = [];
    return new Promise((resolve) => {
      this.closeWaiters.push(resolve);
      this.settleClose();
    });
  }

  private settleClose(): void {
    if (this.all.size > 0 || this.connecting > 0 || this.queue.length > this.queueHead) return;
    if (this.sweepTimer !== null) clearTimeout(this.sweepTimer);
    this.sweepTimer = null;
    for (const w of this.closeWaiters.splice(0)) w();
  }

  /** Fails everything it carries or queues and closes every connection now. */
  destroy(): Promise<void> {
    this.destroyed = true;
    const err = codedError('the pool was destroyed', 'UND_ERR_DESTROYED');
    for (let ex = this.shift(); ex !== null; ex = this.shift()) ex.finishError(err);
    for (const conn of [...this.all]) conn.fail(err);
    this.idle = [];
    if (this.sweepTimer !== null) clearTimeout(this.sweepTimer);
    this.sweepTimer = null;
    for (const w of this.closeWaiters.splice(0)) w();
    return Promise.resolve();
  }
}
