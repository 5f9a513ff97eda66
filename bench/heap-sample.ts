/**
 * Where the data plane allocates, per request: V8's sampling heap profiler (collected objects included, so the
 * garbage a request leaves counts) over the inspector, while the bench's stack (bench/stack.ts: runtime-sim, the
 * control-plane stub, the data plane as in production) serves 10,000 requests at 32 connections.
 *
 * usage: node bench/heap-sample.ts [json|stream] [--requests 10000]
 * Prints bytes per request, then the allocating functions (leaf frames) by bytes per request. Sampled (one sample per
 * 256 bytes on average): compare large differences only.
 */
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { runCount } from './load.ts';
import { BENCH_MODEL, startStack } from './stack.ts';
import { freePort } from './processes.ts';

const { values, positionals } = parseArgs({ options: { requests: { type: 'string', default: '10000' } }, allowPositionals: true });
const mode = positionals[0] === 'stream' ? 'stream' : 'json';
const requests = Number(values.requests);
const inspectPort = await freePort();
const stack = await startStack({ upstream: null, servedModel: 'sim-model', upstreamKey: null, dataplaneNodeArgs: [`--inspect=127.0.0.1:${inspectPort}`] });
const body = Buffer.from(
  JSON.stringify({ model: BENCH_MODEL, messages: [{ role: 'user', content: 'Hello there, how are you today?' }], max_tokens: 16, stream: mode === 'stream' }),
);
const spec = {
  path: '/endpoints/v1/chat/completions',
  headers: { 'content-type': 'application/json', authorization: `Bearer ${stack.apiKey}` },
  body,
  stream: mode === 'stream',
  expect: Buffer.from(BENCH_MODEL),
};
const pool = new Pool(stack.dataplaneUrl, { connections: 32 });
await runCount(pool, spec, 32, 4000); // warm-up: JIT, pools, caches

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children: readonly ProfileNode[];
}
interface SamplingProfile {
  readonly head: ProfileNode;
  readonly samples: readonly { readonly size: number; readonly nodeId: number }[];
}

const targets = (await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
await new Promise((resolve) => ws.addEventListener('open', resolve, { once: true }));
let lastId = 0;
const waiting = new Map<number, (result: unknown) => void>();
ws.addEventListener('message', (ev) => {
  const m = JSON.parse(String(ev.data)) as { id?: number; result?: unknown };
  if (m.id !== undefined) waiting.get(m.id)?.(m.result);
});
const call = (method: string, params: object = {}): Promise<unknown> =>
  new Promise((resolve) => {
    const id = ++lastId;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ id, method, params }));
  });

await call('HeapProfiler.enable');
await call('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
const run = await runCount(pool, spec, 32, requests);
const { profile } = (await call('HeapProfiler.stopSampling')) as { profile: SamplingProfile };

const frameOf = new Map<number, string>();
const walk = (n: ProfileNode): void => {
  frameOf.set(n.id, `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').pop()}:${n.callFrame.lineNumber + 1}`);
  for (const c of n.children) walk(c);
};
walk(profile.head);
const byFrame = new Map<string, number>();
let total = 0;
for (const s of profile.samples) {
  total += s.size;
  const frame = frameOf.get(s.nodeId) ?? '(unknown)';
  byFrame.set(frame, (byFrame.get(frame) ?? 0) + s.size);
}
console.log(`${mode}: ${requests} requests (${run.ok} ok), ${Math.round(total / requests)} bytes allocated per request (sampled)`);
for (const [frame, bytes] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(String(Math.round(bytes / requests)).padStart(7), frame);
ws.close();
await pool.close();
await stack.stop();
