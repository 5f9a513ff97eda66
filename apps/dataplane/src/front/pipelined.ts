import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** Node's own fields: the answer the connection is writing now, and whether an answer said the connection closes. */
type NodeSocket = Socket & { _httpMessage?: ServerResponse | null };
const closesConnection = (res: ServerResponse): boolean => (res as unknown as { _last?: boolean })._last === true;
/** The connection is ending (an answer said `connection: close`, or it lingers after a 413) or gone. */
const ending = (socket: Socket): boolean => socket.destroyed || socket.writableEnded;

/**
 * Whether a request Node's HTTP server has read may be served now: true at once for the usual request; for a request
 * pipelined behind an answer still being written on the same connection, false, and `serve` runs once that answer
 * has finished, or never when that answer closed the connection (or the connection is ending). The usual request
 * thus costs no closure: only a pipelined one is deferred.
 *
 * Node's parser reads on while an answer is written and emits `request` for every request it finds, even behind an
 * answer that ends the connection (a 413 or a malformed body: the connection lingers, reading and dropping what the
 * client still sends, front/lingering-close.ts). Such a request can get no answer, so it must not be forwarded or
 * billed either. Requests behind an answer that keeps the connection open are served in order, as HTTP/1.1 answers
 * them anyway. Node assigns a new request's answer to its connection at once when nothing else is being written
 * there, so `_httpMessage` is another answer only for a pipelined request.
 */
export function servePipelined(req: IncomingMessage, res: ServerResponse, serve: (req: IncomingMessage, res: ServerResponse) => void): boolean {
  const socket = req.socket as NodeSocket;
  const prev = socket._httpMessage;
  if (prev === res || prev == null) return !ending(socket);
  // 'close' follows 'finish' (and comes alone when the connection went first).
  prev.once('close', () => {
    if (prev.writableFinished && !closesConnection(prev) && !ending(socket)) serve(req, res);
  });
  return false;
}
