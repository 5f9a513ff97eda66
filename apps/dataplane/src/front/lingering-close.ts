import type { Socket } from 'node:net';

/** Longest a connection lingers after its answer, reading what the client still sends (nginx's `lingering_time`). */
export const LINGER_MAX_MS = 30_000;
/** Longest a lingering connection waits for more bytes before it is closed (nginx's `lingering_timeout`). */
export const LINGER_IDLE_MS = 5_000;

const lingering = new WeakSet<Socket>();

/**
 * Makes Node's HTTP server close `socket` after the current answer the way nginx's lingering close does: our side is
 * ended (FIN), what the client still sends is read and dropped, and the socket goes when the client closes its side,
 * after `LINGER_IDLE_MS` without bytes, or after `LINGER_MAX_MS` in all.
 *
 * For an answer given before the request body was read (413 for a body over the limit, 415, an auth failure on a
 * large upload): a plain close with unread bytes in the kernel's receive queue makes it send a reset, and a client
 * still writing its body gets EPIPE or ECONNRESET instead of the answer (Python's http.client every time, the
 * OpenAI SDKs in part, which then retry the upload). Node's server ends such a connection (`connection: close`)
 * through `socket.destroySoon()`; this replaces that method on this one socket. Node's parser keeps reading the
 * body meanwhile (the server dumps an unread request body) and the socket is half-open (Node's HTTP server allows it).
 */
export function lingerOnClose(socket: Socket): void {
  if (lingering.has(socket) || socket.destroyed) return;
  lingering.add(socket);
  socket.destroySoon = function lingeringDestroySoon(this: Socket): void {
    if (this.destroyed) return;
    const started = Date.now();
    let seen = this.bytesRead;
    // One timer, re-armed while bytes keep coming (Node's parser may read the socket itself: no 'data' events, and
    // the HTTP server sets socket timeouts of its own, so progress is read off `bytesRead`).
    let timer: NodeJS.Timeout;
    const check = (): void => {
      const now = Date.now();
      if (this.bytesRead === seen || now - started >= LINGER_MAX_MS) {
        this.destroy();
        return;
      }
      seen = this.bytesRead;
      timer = setTimeout(check, Math.min(LINGER_IDLE_MS, LINGER_MAX_MS - (now - started)));
      timer.unref();
    };
    timer = setTimeout(check, LINGER_IDLE_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
    // The client closed its side: nothing more to read.
    this.once('end', () => this.destroy());
    if (this.writable) this.end();
    // Bytes nobody asks for: dropped (a no-op when Node's parser reads the socket itself).
    this.resume();
  };
}
