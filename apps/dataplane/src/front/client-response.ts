import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';

/**
 * What the chat path writes an answer to: the part of Node's `ServerResponse` it uses. A request that reached Node's
 * HTTP server (Fastify's routes, or the fast path on a connection that server owns) answers on a `ServerResponse`;
 * one the node's own HTTP/1.1 front served (front/http1-front.ts) answers on a `FrontResponse`. Both behave alike
 * for these members, including the events: 'close' once the answer is done or the client has gone (`writableFinished`
 * tells which), 'drain' after a write that returned false.
 */
export interface ClientResponse {
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
  /** True once a head without a length went out (chunks then follow). */
  readonly chunkedEncoding: boolean;
  /** The client's socket while the response holds it, for chunk writes straight to it; null: write through the response. */
  readonly socket: Socket | null;
  readonly req: { readonly headers: IncomingHttpHeaders } | undefined;
  setHeader(name: string, value: number | string | readonly string[]): unknown;
  getHeader(name: string): number | string | string[] | undefined;
  writeHead(status: number, headers?: OutgoingHttpHeaders): unknown;
  flushHeaders(): void;
  write(chunk: string | Buffer, encoding?: BufferEncoding): boolean;
  end(chunk?: string | Buffer, encoding?: BufferEncoding): unknown;
  /** Closes the client's connection now, whatever is still unsent (a client that stopped reading). */
  destroy(): unknown;
  on(event: 'close' | 'drain', listener: () => void): unknown;
  once(event: 'close' | 'drain', listener: () => void): unknown;
  off(event: 'close' | 'drain', listener: () => void): unknown;
}
