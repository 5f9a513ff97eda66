// A stream's usage record is written before its last bytes ([DONE]) leave the node: a node killed between
// the two must not have sent a whole answer it never recorded.
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageRecord } from '@infer/shared';
import { NAME, chatBody, deadUrl, makeSnapshot, post, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

let sim: StartedSim;
let dp: StartedApp;
const sockets: Socket[] = [];
/** Bytes the node had handed to each client socket when it wrote each record. */
const seen: { record: UsageRecord; written: number }[] = [];

beforeAll(async () => {
  sim = await startSim();
  const sink = { record: (r: UsageRecord) => void seen.push({ record: r, written: sockets.reduce((n, s) => n + s.bytesWritten, 0) }) };
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), sink);
  dp.app.server.on('connection', (s: Socket) => sockets.push(s));
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

describe('usage record and the end of a stream', () => {
  for (const [label, url] of [
    ['shared', () => `${dp.url}/endpoints/v1/chat/completions`],
    ['dedicated', () => `${dp.url}/funccall/acme/endpoints/${NAME}/v1/chat/completions`],
  ] as const) {
    it(`${label}: the record is written while [DONE] has not yet been handed to the socket`, async () => {
      seen.length = 0;
      for (const s of sockets) s.destroy();
      sockets.length = 0;
      const res = await post(url(), chatBody({ model: NAME, stream: true, max_tokens: 6 }), undefined, { connection: 'close' });
      const text = await res.text();
      expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
      await waitFor(() => seen.length === 1);
      const total = sockets.reduce((n, s) => n + s.bytesWritten, 0);
      expect(seen[0]!.record.status).toBe(200);
      // Everything but the final write had gone out; the final write (with [DONE]) came after the record.
      expect(seen[0]!.written).toBeLessThan(total);
    });
  }
});
