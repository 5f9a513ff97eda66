import { createServer, connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP relay to a target port that a test can cut (every connection reset, new ones refused) and
 * restore: a network partition between one process and another, without touching either.
 */
export interface CutProxy {
  readonly url: string;
  /** Resets every relayed connection and refuses new ones until restore(). */
  cut(): void;
  restore(): void;
  /** Connections refused while cut (a node trying to reconnect). */
  refusedCount(): number;
  /** When (performance.now()) the first request line starting with `prefix` was relayed after `since`, or null. */
  firstRequestSince(since: number, prefix: string): number | null;
  close(): Promise<void>;
}

export async function startCutProxy(targetPort: number): Promise<CutProxy> {
  const open = new Set<Socket>();
  let isCut = false;
  let refused = 0;
  const requests: { at: number; line: string }[] = [];
  const server = createServer((client) => {
    if (isCut) {
      refused++;
      client.resetAndDestroy();
      return;
    }
    // Keep-alive connections carry several requests: note every chunk that starts with a request line.
    client.on('data', (chunk: Buffer) => {
      const line = chunk.subarray(0, 200).toString('latin1').split('\r\n')[0] ?? '';
      if (!/^[A-Z]+ \S+ HTTP\/1\.[01]$/.test(line)) return;
      if (requests.length > 1000) requests.splice(0, 500);
      requests.push({ at: performance.now(), line });
    });
    const upstream = connect(targetPort, '127.0.0.1');
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
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    cut() {
      isCut = true;
      for (const s of open) s.resetAndDestroy();
    },
    restore() {
      isCut = false;
    },
    refusedCount: () => refused,
    firstRequestSince: (since, prefix) => requests.find((r) => r.at >= since && r.line.startsWith(prefix))?.at ?? null,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
