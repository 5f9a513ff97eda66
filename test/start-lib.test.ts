// pnpm start's plan of simulated runtimes (scripts/start-lib.ts): one process per local port, serving every model
// routed there, with a window as large as the catalog promises (the data plane checks prompts against that).
import { describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '@infer/shared';
import { planSims } from '../scripts/start-lib.ts';

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
