import { connect, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP load balancer over a few 127.0.0.1 ports: round robin per connection, and a backend that
 * refuses the connection is skipped for the next one (what nginx's `proxy_next_upstream error` does in
 * infra/compose.yaml). Connections already relayed to a backend that dies are reset, as they would be.
 */
export interface FailoverBalancer {
  readonly url: string;
  /** Connections relayed to each backend port so far. */
  readonly relayed: ReadonlyMap<number, number>;
  close(): Promise<void>;
}

export async function startFailoverBalancer(ports: readonly number[]): Promise<FailoverBalancer> {
  const open = new Set<Socket>();
  const relayed = new Map<number, number>(ports.map((p) => [p, 0]));
  let next = 0;
  const dial = (client: Socket, attempt: number): void => {
    if (attempt >= ports.length) {
      client.resetAndDestroy();
      return;
    }
    const port = ports[next++ % ports.length]!;
    const upstream = connect(port, '127.0.0.1');
    // Before 'connect' only: a backend that refuses (or is gone) is skipped; after it, errors reset both sides.
    upstream.once('error', () => dial(client, attempt + 1));
    upstream.once('connect', () => {
      relayed.set(port, (relayed.get(port) ?? 0) + 1);
      upstream.removeAllListeners('error');
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        open.add(a);
        a.on('error', () => b.destroy());
        a.on('close', () => {
          open.delete(a);
          b.destroy();
        });
        a.pipe(b);
      }
      client.resume();
    });
  };
  const server = createServer({ pauseOnConnect: true }, (client) => {
    client.on('error', () => undefined);
    dial(client, 0);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    relayed,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
