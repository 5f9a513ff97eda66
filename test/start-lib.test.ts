// pnpm start's plan of simulated runtimes (scripts/start-lib.ts): one process per local port, serving every model
// routed there, with a window as large as the catalog promises (the data plane checks prompts against that).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '@infer/shared';
import { planSims, waitForHttp } from '../scripts/start-lib.ts';

type Endpoint = ConfigSnapshot['endpoints'][number];
const endpoint = (name: string, contextLength: number | null, urls: readonly string[], kind: 'sim' | 'vllm' = 'sim'): Endpoint =>
  ({
    name,
    contextLength,
    upstreams: urls.map((url, i) => ({ id: `${name}-${i}`, url, kind, servedModel: `${name}-served`, apiKey: null })),
  }) as unknown as Endpoint;

describe('planSims', () => {
  it('gives each port the largest Context Length of the entries it serves, and none when no entry has one', () => {
    const snapshot = {
      endpoints: [
        endpoint('big', 131_072, ['http://127.0.0.1:9101']),
        endpoint('small', 8_192, ['http://127.0.0.1:9101', 'http://127.0.0.1:9102']),
        endpoint('unknown', null, ['http://127.0.0.1:9103']),
        endpoint('remote', 200_000, ['http://10.0.0.9:9101']),
        endpoint('real', 400_000, ['http://127.0.0.1:9101'], 'vllm'),
      ],
    } as unknown as ConfigSnapshot;
    expect(planSims(snapshot)).toEqual([
      { port: 9101, models: ['big-served', 'small-served'], maxContextLength: 131_072 },
      { port: 9102, models: ['small-served'], maxContextLength: 8_192 },
      { port: 9103, models: ['unknown-served'], maxContextLength: null },
    ]);
  });
});

// pnpm start writes demo.env once the data plane holds the control plane's current config: a node restarted from its
// saved snapshot is ready (200) at once with the older version, and the demo key issued at this start is not in it.
describe('waitForHttp with a readiness test on the body', () => {
  it('waits past 200s whose body fails the test, and names the last answer when it gives up', async () => {
    let served = 0;
    const server = createServer((_req, res) => {
      served++;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ status: 'ready', configVersion: served < 4 ? 7 : 9 }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`;
      const atLeast = (v: number) => (body: unknown) => Number((body as { configVersion?: unknown }).configVersion) >= v;
      await waitForHttp(url, 10_000, atLeast(9));
      expect(served).toBe(4);
      await expect(waitForHttp(url, 400, atLeast(10))).rejects.toThrow(
        /did not become ready within 400 ms \(answered \{"status":"ready","configVersion":9\}\)/,
      );
    } finally {
      server.close();
    }
  });
});
