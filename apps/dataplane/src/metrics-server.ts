import { createHash, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DataplaneMetrics } from './metrics.ts';

/** Where the internal metrics listener binds, and the bearer token it asks for (none: network-level trust only). */
export interface MetricsListenerOptions {
  readonly port: number;
  /** Default 127.0.0.1: metrics are for the operator's scraper, never the public surface. */
  readonly host?: string;
  readonly token?: string | null;
}

export interface MetricsServer {
  /** Binds; resolves with the URL of `/metrics`. */
  listen(): Promise<string>;
  /** `http://host:port/metrics` once bound, else null. */
  url(): string | null;
  close(): Promise<void>;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * `GET /metrics` on its own listener, apart from the inference surface: tenants reaching the public port
 * cannot read other tenants' traffic figures, and a scraper needs no API key.
 */
export function createMetricsServer(metrics: DataplaneMetrics, opts: MetricsListenerOptions): MetricsServer {
  const host = opts.host ?? '127.0.0.1';
  // Compared as digests: constant time whatever the presented length.
  const expected = opts.token ? digest(`Bearer ${opts.token}`) : null;
  let bound: string | null = null;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    if (expected !== null && !timingSafeEqual(digest(req.headers.authorization ?? ''), expected)) {
      res.writeHead(401, { 'content-type': 'text/plain; charset=utf-8', 'www-authenticate': 'Bearer' }).end('unauthorized\n');
      return;
    }
    const body = metrics.render();
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  server.keepAliveTimeout = 65_000;

  return {
    async listen() {
      server.listen(opts.port, host);
      await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err as Error))]);
      const { port } = server.address() as AddressInfo;
      bound = `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics`;
      return bound;
    },
    url: () => bound,
    close: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) {
          resolve();
          return;
        }
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
