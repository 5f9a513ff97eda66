import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { ApiError } from '@infer/shared';
import type { FastifyBaseLogger } from 'fastify';
import { authenticateRequest } from '../auth.ts';
import type { ConfigStore } from '../config/config-store.ts';
import type { ResolvedKey } from '../config/config-view.ts';
import type { ClientResponse } from '../front/client-response.ts';
import { exceedsJsonDepth, tooDeepError } from '../proxy/json-depth.ts';
import { membersAsWritten } from '../proxy/raw-payload.ts';
import { requestIdOf } from '../request-id.ts';
import type { ChatExchange, ChatHandler, DedicatedParams } from './chat-handler.ts';
import { setRawCorsHeaders } from './cors-routes.ts';

/** Fastify's own JSON body parser (`getDefaultJsonParser`), so bodies parse and fail exactly as on its routes. */
export type JsonBodyParser = (body: string, done: (err: Error | null, value?: unknown) => void) => void;

export interface ChatFastPathOptions {
  readonly store: ConfigStore;
  readonly chat: ChatHandler;
  readonly bodyLimit: number;
  readonly parseJson: JsonBodyParser;
  readonly log: FastifyBaseLogger;
  /** True once the app is closing: requests then go to Fastify, which refuses them with its 503. */
  readonly closing: () => boolean;
}

/**
 * Bodies shorter than this go to the runtime serialised again rather than spliced from their bytes. For a one-line
 * body the splice's checks and copies (ten native calls) measured 0 to 10% more CPU per request than serialising
 * (bench/RESULTS.md, fourth session); from a few KiB the splice saves a quarter to a third.
 */
export const SPLICE_MIN_BYTES = 1024;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Answers a request itself (true) or leaves it to Fastify (false). */
export type FastPath = (req: IncomingMessage, res: ServerResponse) => boolean;

/** A plain chat request's route, from its head: the shared URL (`dedicated` null) or a dedicated one, and its body length. */
export interface FastRoute {
  readonly dedicated: DedicatedParams | null;
  readonly length: number;
}

/** The fast path, for Node's request event (`onRequest`) and for the node's own HTTP/1.1 front (`route`, `serve`). */
export interface ChatFastPath {
  readonly onRequest: FastPath;
  /** The route of a POST with these URL and headers when it is a plain chat request, else null (Fastify's then). */
  route(url: string, headers: IncomingHttpHeaders): FastRoute | null;
  /** `route` for the HTTP/1.1 front: null as well for a caller whose key does not resolve (Node's server refuses it). */
  frontRoute(url: string, headers: IncomingHttpHeaders): FastRoute | null;
  /** Serves a plain chat request whose whole body (exactly `route.length` bytes) has arrived. */
  serve(route: FastRoute, headers: IncomingHttpHeaders, res: ClientResponse, raw: Buffer): void;
}

const SHARED_PATH = '/endpoints/v1/chat/completions';
const DEDICATED_HEAD = '/funccall/';
const DEDICATED_MIDDLE = '/endpoints/';
const DEDICATED_TAIL = '/v1/chat/completions';
/** A path segment the router would take as is: no encoding, no separators, within its 100-character limit. */
const PLAIN_SEGMENT = /^[^%/?#;]{1,100}$/;

/** `{ tenant, name }` of a plain dedicated chat URL, or null (anything else goes to the router). */
function dedicatedParams(url: string): DedicatedParams | null {
  if (!url.startsWith(DEDICATED_HEAD) || !url.endsWith(DEDICATED_TAIL)) return null;
  const middle = url.slice(DEDICATED_HEAD.length, url.length - DEDICATED_TAIL.length);
  const slash = middle.indexOf('/');
  if (slash < 0 || !middle.startsWith(DEDICATED_MIDDLE, slash)) return null;
  const tenant = middle.slice(0, slash);
  const name = middle.slice(slash + DEDICATED_MIDDLE.length);
  return PLAIN_SEGMENT.test(tenant) && PLAIN_SEGMENT.test(name) ? { tenant, name } : null;
}

/** The JSON content types the fast path takes; any other (or a charset to decode) goes through Fastify's parsers. */
const isPlainJson = (ct: string | undefined): boolean => ct === 'application/json' || ct === 'application/json; charset=utf-8';

/**
 * Serves plain chat requests (POST, exact path, JSON with a Content-Length within the limit, no Content-Encoding) straight from
 * Node's request event or the node's own front, skipping Fastify's routing, hooks, reply objects and content-type
 * machinery; what happens to them (auth, body errors, limits, forwarding, metrics, logs, headers) is what the Fastify
 * routes do, through the same code. Every other request goes to Fastify.
 */
export function createChatFastPath(opts: ChatFastPathOptions): ChatFastPath {
  const { store, chat, bodyLimit, parseJson, log } = opts;

  const route = (url: string, headers: IncomingHttpHeaders): FastRoute | null => {
    if (opts.closing()) return null;
    let dedicated: DedicatedParams | null = null;
    if (url !== SHARED_PATH) {
      dedicated = dedicatedParams(url);
      if (dedicated === null) return null;
    }
    // A Content-Encoding is refused (or `identity` let through) by the Fastify routes.
    if (!isPlainJson(headers['content-type']) || headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined) return null;
    const length = Number(headers['content-length']);
    if (!(length > 0 && length <= bodyLimit)) return null;
    return { dedicated, length };
  };

  /** The exchange and the caller's key, or null once an auth failure is answered. */
  const begin = (r: FastRoute, headers: IncomingHttpHeaders, res: ClientResponse): [ChatExchange, ResolvedKey] | null => {
    const startPerf = performance.now();
    const startedAt = Date.now();
    const requestId = requestIdOf(headers);
    res.setHeader('x-request-id', requestId);
    if (headers.origin !== undefined) setRawCorsHeaders(res);
    const x: ChatExchange = {
      requestId,
      callerId: headers['x-request-id'] === requestId,
      res,
      startedAt,
      startPerf,
      mode: r.dedicated === null ? 'shared' : 'dedicated',
      log,
    };
    const key = authenticateRequest(store, headers.authorization, startedAt);
    if (key instanceof ApiError) {
      chat.fail(x, key);
      return null;
    }
    return [x, key];
  };

  /** The body is all here: depth check, parse, serve. */
  const bodyRead = (x: ChatExchange, key: ResolvedKey, r: FastRoute, raw: Buffer): void => {
    const text = raw.toString('utf8');
    // Refused before anything is parsed or counted: deep nesting would blow the stack further on.
    if (exceedsJsonDepth(text)) {
      chat.fail(x, tooDeepError());
      return;
    }
    parseJson(text, (parseErr, body) => {
      if (parseErr !== null) bodyFailed(x, parseErr);
      // The bytes go along when the runtime may get them as they are (proxy/raw-payload.ts) and the body is long
      // enough for the splice to pay: a short one is serialised again for less than the splice's native calls cost.
      else void chat.serve(x, key, r.dedicated, body, raw.length >= SPLICE_MIN_BYTES && isRecord(body) && membersAsWritten(raw, body) ? raw : undefined);
    });
  };

  const onRequest: FastPath = (req, res) => {
    if (req.method !== 'POST') return false;
    const r = route(req.url ?? '', req.headers);
    if (r === null) return false;
    const length = r.length;
    const started = begin(r, req.headers, res);
    if (started === null) return true;
    const [x, key] = started;

    // Read the body as Fastify does: raw buffers, decoded once, length checked against Content-Length.
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      chunks.push(chunk);
    };
    let ended = false;
    const onEnd = (err?: Error): void => {
      // Once: the listeners stay (removing three costs more than the flag), a later 'error' is ignored.
      if (ended) return;
      ended = true;
      if (err !== undefined) {
        bodyFailed(x, Object.assign(err, { statusCode: 400 }));
        return;
      }
      if (received !== length) {
        bodyFailed(x, Object.assign(new Error('Request body size did not match Content-Length'), { code: 'FST_ERR_CTP_INVALID_CONTENT_LENGTH' }));
        return;
      }
      const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received);
      chunks.length = 0; // the 'data' listener (kept) must not hold the body for the request's life
      bodyRead(x, key, r, raw);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onEnd);
    return true;
  };

  const serve = (r: FastRoute, headers: IncomingHttpHeaders, res: ClientResponse, raw: Buffer): void => {
    const started = begin(r, headers, res);
    if (started !== null) bodyRead(started[0], started[1], r, raw);
  };

  function bodyFailed(x: ChatExchange, err: Error): void {
    // As Fastify does after a body error: the client may still be sending, so the connection closes.
    x.res.setHeader('connection', 'close');
    chat.fail(x, err);
  }

  /**
   * The front's route: `route`, for a caller whose key resolves. The front reads a whole body before it serves it; a
   * caller without a valid key goes to Node's server instead, which refuses it before reading the body (no client
   * without a key makes the node hold up to the body limit per connection).
   */
  const frontRoute = (url: string, headers: IncomingHttpHeaders): FastRoute | null => {
    const r = route(url, headers);
    return r !== null && !(authenticateRequest(store, headers.authorization, Date.now()) instanceof ApiError) ? r : null;
  };

  return { onRequest, route, frontRoute, serve };
}
