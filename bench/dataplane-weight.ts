/**
 * How heavy the data-plane node is (issue 12, "A lighter node"), one run, variants side by side:
 * - CPU per request: closed-loop JSON and streaming requests (runtime-sim at zero latency) through the bare
 *   Node relay (bench/bare-proxy.ts) and each data-plane variant, interleaved in rounds (the order rotates
 *   each round) so that every target sees the same machine load; CPU µs/request of each proxy process, and
 *   the ratio to the bare relay.
 * - Memory: N concurrent slow streams through each variant (a fresh node each, in turn): RSS and V8 heap
 *   idle, at peak while holding them, and 5 s and 20 s after they ended.
 * A variant is a data-plane source tree and Node flags: `--variant 'name|/repo/root|--flag --flag'` (root
 * defaults to this checkout; a root ending in `.js` is the node's entry itself, e.g. a compiled bundle), so a
 * change is measured against a copy of the tree before it in one run; a fourth field sets environment
 * variables of that node ('NAME=value NAME=value').
 *
 * usage: node bench/dataplane-weight.ts [--variant 'name|root|flags|ENV=v']... [--requests 4000] [--rounds 3]
 *          [--connections 32] [--streams 1000] [--stream-chunks 100] [--chunk-ms 50] [--heap-snapshot]
 *          [--prompt-kib 0] [--modes json,stream] [--bare-flags='--flag ...'] [--cpu-prof DIR] [--json]
 * (`--bare-flags`: one more bare relay, started with these Node flags, e.g. the node's own `--max-semi-space-size=2`, to
 * see how much of the gap is that young-generation cap, which the node keeps for its RSS; ratios stay to the plain relay.)
 * (`--prompt-kib N`: the requests of both cases carry a conversation of about N KiB instead of one short question.)
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { configSnapshotSchema, generateSecret, hashSecret, secretDisplayPrefix, SECRET_PREFIX } from '@infer/shared';
import { chatMessages, runCount, Samples, type RequestSpec } from './load.ts';
import { cpuMs, freePort, rssKiB, startNode, waitReady, type Child } from './processes.ts';

const here = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));
const MODEL = 'weight-model';
const SERVED = 'weight-served';

interface Variant {
  readonly name: string;
  readonly root: string;
  readonly nodeArgs: readonly string[];
  /** Extra environment of the node (`NAME=value` pairs); `CONTROL_PLANE_URL=` runs it without metering. */
  readonly env: Readonly<Record<string, string>>;
}

const { values } = parseArgs({
  options: {
    variant: { type: 'string', multiple: true },
    requests: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    streams: { type: 'string', default: '0' },
    'stream-chunks': { type: 'string', default: '100' },
    'chunk-ms': { type: 'string', default: '50' },
    'prompt-kib': { type: 'string', default: '0' },
    modes: { type: 'string', default: 'json,stream' },
    'bare-flags': { type: 'string', default: '' },
    'heap-snapshot': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const num = (s: string): number => {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0) throw new Error(`not a count: ${s}`);
  return n;
};
const variants: Variant[] = (values.variant ?? ['current||']).map((v) => {
  const [name = '', root = '', flags = '', envText = ''] = v.split('|');
  const env = Object.fromEntries(
    envText
      .split(' ')
      .filter((e) => e.includes('='))
      .map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );
  return { name, root: root === '' ? here('.') : resolve(root), nodeArgs: flags.split(' ').filter((f) => f !== ''), env };
});
const requests = num(values.requests);
const rounds = num(values.rounds);
const connections = num(values.connections);
const streams = num(values.streams);
const chunks = num(values['stream-chunks']);
const chunkMs = num(values['chunk-ms']);
const promptKib = num(values['prompt-kib']);
const modes = values.modes.split(',').map((m) => {
  if (m !== 'json' && m !== 'stream') throw new Error(`--modes takes json and/or stream, not ${m}`);
  return m;
});
const log = (line: string): void => console.error(`[weight] ${line}`);

const dir = mkdtempSync(join(tmpdir(), 'infer-weight-'));
const secret = generateSecret(SECRET_PREFIX.inference);
const children: Child[] = [];

function writeSnapshot(name: string, upstreamUrl: string, concurrency: number): string {
  const snapshot = configSnapshotSchema.parse({
    version: 1,
    tenants: [{ id: 'tenant-w', slug: 'weight', rpmLimit: null, tpmLimit: null }],
    keys: [
      { id: 'key-w', tenantId: 'tenant-w', hash: hashSecret(secret), prefix: secretDisplayPrefix(secret), expiresAt: null, rpmLimit: null, tpmLimit: null },
    ],
    endpoints: [
      {
        id: 'endpoint-w',
        name: MODEL,
        provider: 'bench',
        contextLength: 32768,
        concurrency,
        coldStartSeconds: null,
        offeredShared: true,
        offeredDedicated: false,
        published: true,
        priceInputPerM: 0.1,
        priceOutputPerM: 0.2,
        upstreams: [{ id: 'upstream-w', url: upstreamUrl, kind: 'sim', servedModel: SERVED, apiKey: null }],
      },
    ],
    deployments: [],
  });
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(snapshot), { mode: 0o600 });
  return file;
}

function start(child: Child): Child {
  children.push(child);
  return child;
}

async function startSim(itlMs: number, slots: number): Promise<string> {
  const port = await freePort();
  const sim = start(
    startNode('sim', here('packages/runtime-sim/src/cli.ts'), [
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--model',
      SERVED,
      '--ttft-ms',
      '0',
      '--itl-ms',
      String(itlMs),
      '--batch-slots',
      String(slots),
      '--max-queue',
      '0',
    ]),
  );
  const url = `http://127.0.0.1:${port}`;
  await waitReady(sim, `${url}/health`);
  return url;
}

async function startStub(configFile: string): Promise<string> {
  const port = await freePort();
  const stub = start(startNode('stub', here('bench/control-plane-stub.ts'), [String(port), configFile]));
  const url = `http://127.0.0.1:${port}`;
  await waitReady(stub, `${url}/healthz`);
  return url;
}

/** The node's entry: `<root>/apps/dataplane/src/server.ts`, or a root that is itself a `.js` file (a compiled bundle). */
const entryOf = (root: string): string => (/\.m?js$/.test(root) ? root : join(root, 'apps/dataplane/src/server.ts'));

interface Node {
  readonly child: Child;
  readonly url: string;
}

async function startDataplane(v: Variant, configFile: string, stubUrl: string, env: Record<string, string>, extraArgs: readonly string[] = []): Promise<Node> {
  const port = await freePort();
  const child = start(
    startNode(
      `dataplane-${v.name}`,
      entryOf(v.root),
      [],
      {
        HOST: '127.0.0.1',
        PORT: String(port),
        CONFIG_FILE: configFile,
        CONTROL_PLANE_URL: stubUrl,
        NODE_TOKEN: 'bench-node-token',
        USAGE_SPOOL_DIR: join(dir, `spool-${v.name}-${port}`),
        LOG_LEVEL: 'warn',
        METRICS_PORT: '0',
        ...env,
        ...v.env,
      },
      [...v.nodeArgs, ...extraArgs],
    ),
  );
  const url = `http://127.0.0.1:${port}`;
  await waitReady(child, `${url}/readyz`);
  return { child, url };
}

function spec(path: string, stream: boolean, bearer: string | null, model: string, maxTokens: number): RequestSpec {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (bearer !== null) headers['authorization'] = `Bearer ${bearer}`;
  const body = Buffer.from(JSON.stringify({ model, messages: chatMessages(promptKib), max_tokens: maxTokens, stream }));
  return { path, headers, body, stream, expect: Buffer.from(model) };
}

interface CpuRow {
  readonly target: string;
  readonly mode: 'json' | 'stream';
  requests: number;
  failed: number;
  cpuMs: number;
  sysMs: number;
}

/** CPU per request, every target in every round, order rotated per round. */
async function cpuCase(): Promise<CpuRow[]> {
  const simUrl = await startSim(0, 4096);
  const configFile = writeSnapshot('cpu', simUrl, 4);
  const stubUrl = await startStub(configFile);
  type Target = { name: string; child: Child; url: string; json: RequestSpec; stream: RequestSpec };
  const startBare = async (name: string, flags: readonly string[]): Promise<Target> => {
    const port = await freePort();
    const prof = values['cpu-prof'] !== undefined ? ['--cpu-prof', '--cpu-prof-dir', resolve(values['cpu-prof'], name)] : [];
    const child = start(startNode(name, here('bench/bare-proxy.ts'), [String(port), simUrl, SERVED], {}, [...prof, ...flags]));
    const url = `http://127.0.0.1:${port}`;
    await waitReady(child, `${url}/healthz`);
    return { name, child, url, json: spec('/v1/chat/completions', false, null, SERVED, 16), stream: spec('/v1/chat/completions', true, null, SERVED, 16) };
  };
  // The reference (Node's defaults), and with --bare-flags the same relay under those flags as one more target.
  const targets: Target[] = [await startBare('bare-proxy', [])];
  const bareFlags = values['bare-flags'].split(' ').filter((f) => f !== '');
  if (bareFlags.length > 0) targets.push(await startBare(`bare-proxy ${bareFlags.join(' ')}`, bareFlags));
  for (const v of variants) {
    const profArgs = values['cpu-prof'] !== undefined ? ['--cpu-prof', '--cpu-prof-dir', resolve(values['cpu-prof'], v.name)] : [];
    const node = await startDataplane(v, configFile, stubUrl, {}, profArgs);
    targets.push({
      name: v.name,
      child: node.child,
      url: node.url,
      json: spec('/endpoints/v1/chat/completions', false, secret, MODEL, 16),
      stream: spec('/endpoints/v1/chat/completions', true, secret, MODEL, 16),
    });
  }
  const pools = new Map(targets.map((t) => [t.name, new Pool(t.url, { connections, pipelining: 1, keepAliveTimeout: 30_000 })]));
  const rows = new Map<string, CpuRow>();
  // Warm-up: JIT, pools and caches, not measured.
  for (const t of targets) {
    for (const mode of modes) {
      await runCount(pools.get(t.name)!, t[mode], connections, Math.min(2000, requests));
      rows.set(`${t.name}/${mode}`, { target: t.name, mode, requests: 0, failed: 0, cpuMs: 0, sysMs: 0 });
    }
  }
  for (let r = 0; r < rounds; r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length]!);
    for (const mode of modes) {
      for (const t of order) {
        const row = rows.get(`${t.name}/${mode}`)!;
        const c0 = cpuMs(t.child.pid);
        const k0 = sysMs(t.child.pid);
        const s = await runCount(pools.get(t.name)!, t[mode], connections, requests);
        const c1 = cpuMs(t.child.pid);
        row.sysMs += sysMs(t.child.pid) - k0;
        row.requests += s.ok;
        row.failed += s.errors + s.non2xx;
        row.cpuMs += (c1 ?? 0) - (c0 ?? 0);
        if (s.firstFailure !== null) log(`${t.name} ${mode}: ${s.firstFailure}`);
      }
    }
    log(`cpu round ${r + 1}/${rounds} done`);
  }
  for (const p of pools.values()) await p.close();
  for (const t of targets) await stop(t.child);
  return [...rows.values()];
}

/** Kernel (system) CPU time of a process in ms: syscalls, mostly socket and file writes. */
function sysMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[12]) * 10;
  } catch {
    return 0;
  }
}

async function stop(child: Child): Promise<void> {
  if (child.exited()) return;
  child.proc.kill('SIGTERM');
  await new Promise<void>((done) => {
    const timer = setTimeout(() => {
      child.proc.kill('SIGKILL');
      done();
    }, 10_000);
    child.proc.once('exit', () => {
      clearTimeout(timer);
      done();
    });
  });
}

interface MemRow {
  readonly variant: string;
  readonly streams: number;
  completed: number;
  ttfb_p50_ms: number;
  idle_rss_mib: number;
  idle_heap_mib: number;
  peak_rss_mib: number;
  peak_heap_mib: number;
  after5_rss_mib: number;
  after5_heap_mib: number;
  after20_rss_mib: number;
  after20_heap_mib: number;
  cpu_ms_per_stream: number;
}

const MiB = 1024 * 1024;
const r1 = (x: number): number => Math.round(x * 10) / 10;

interface ProbeLine {
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapPhysical: number;
  readonly external: number;
}

/** Latest and peak memoryUsage() lines printed by bench/memory-probe.ts in the child. */
function probe(child: Child): { last: () => ProbeLine; peak: () => { rss: number; heapUsed: number; atPeakRss: ProbeLine }; resetPeak: () => void } {
  let last: ProbeLine = { rss: 0, heapUsed: 0, heapPhysical: 0, external: 0 };
  let peak = { rss: 0, heapUsed: 0, atPeakRss: last };
  let buf = '';
  child.proc.stderr?.on('data', (chunk: Buffer) => {
    buf += chunk.toString('utf8');
    let nl = buf.indexOf('\n');
    while (nl >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.startsWith('MEMPROBE ')) {
        const m = JSON.parse(line.slice(9)) as ProbeLine;
        last = m;
        peak = { rss: Math.max(peak.rss, m.rss), heapUsed: Math.max(peak.heapUsed, m.heapUsed), atPeakRss: m.rss >= peak.rss ? m : peak.atPeakRss };
      }
      nl = buf.indexOf('\n');
    }
  });
  return { last: () => last, peak: () => peak, resetPeak: () => (peak = { rss: last.rss, heapUsed: last.heapUsed, atPeakRss: last }) };
}

/** RSS split: V8 heap pages, external (ArrayBuffers, wasm), and the rest (binary text, malloc, stacks). */
const split = (m: ProbeLine): string =>
  `rss ${r1(m.rss / MiB)} = heap ${r1(m.heapPhysical / MiB)} (used ${r1(m.heapUsed / MiB)}) + external ${r1(m.external / MiB)} + other ${r1((m.rss - m.heapPhysical - m.external) / MiB)}`;

async function openStreams(url: string, n: number, onAllStarted: () => void): Promise<{ completed: number; ttfb: Samples }> {
  const pool = new Pool(url, { connections: n, pipelining: 1, keepAliveTimeout: 10_000 });
  const s = spec('/endpoints/v1/chat/completions', true, secret, MODEL, chunks);
  const ttfb = new Samples();
  let completed = 0;
  let started = 0;
  const one = async (): Promise<void> => {
    const sent = performance.now();
    try {
      const res = await pool.request({ method: 'POST', path: s.path, headers: s.headers, body: s.body });
      let first = true;
      let tail = '';
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        if (first) {
          first = false;
          ttfb.add(performance.now() - sent);
          if (++started === n) onAllStarted();
        }
        tail = (tail + chunk.toString('latin1')).slice(-64);
      }
      if (res.statusCode === 200 && tail.includes('[DONE]')) completed++;
    } catch {
      // not completed
    }
  };
  await Promise.all(Array.from({ length: n }, one));
  await pool.close();
  return { completed, ttfb };
}

async function memoryCase(): Promise<MemRow[]> {
  const simUrl = await startSim(chunkMs, streams * 2 + 64);
  const configFile = writeSnapshot('mem', simUrl, 1);
  const stubUrl = await startStub(configFile);
  const rows: MemRow[] = [];
  // The probe is loaded as .mjs (it has no type syntax) so that a compiled-JS variant loads no TypeScript at all.
  const probeFile = join(dir, 'memory-probe.mjs');
  writeFileSync(probeFile, readFileSync(here('bench/memory-probe.ts')));
  for (const v of variants) {
    const extra = ['--import', probeFile, ...(values['heap-snapshot'] ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${resolve('.')}`] : [])];
    const node = await startDataplane(v, configFile, stubUrl, { REPLICA_BASE_CONCURRENCY: String(streams), QUEUE_MAX: '0' }, extra);
    const p = probe(node.child);
    // A few streams first (code compiled, pools made), then settle.
    await openStreams(node.url, 20, () => {});
    await sleep(3000);
    const idle = p.last();
    p.resetPeak();
    if (values['heap-snapshot']) {
      node.child.proc.kill('SIGUSR2');
      await sleep(5000);
    }
    log(`${v.name}: idle ${split(idle)}; opening ${streams} streams`);
    const c0 = cpuMs(node.child.pid) ?? 0;
    let peakRss = 0;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssKiB(node.child.pid) ?? 0)), 100);
    const r = await openStreams(node.url, streams, () => {
      if (values['heap-snapshot']) {
        log(`${v.name}: every stream started; heap snapshot`);
        node.child.proc.kill('SIGUSR2');
      }
    });
    clearInterval(sampler);
    const c1 = cpuMs(node.child.pid) ?? 0;
    const peak = p.peak();
    await sleep(5000);
    const a5 = p.last();
    await sleep(15_000);
    const a20 = p.last();
    rows.push({
      variant: v.name,
      streams,
      completed: r.completed,
      ttfb_p50_ms: r1(r.ttfb.percentile(50)),
      idle_rss_mib: r1(idle.rss / MiB),
      idle_heap_mib: r1(idle.heapUsed / MiB),
      peak_rss_mib: r1(Math.max(peak.rss, peakRss * 1024) / MiB),
      peak_heap_mib: r1(peak.heapUsed / MiB),
      after5_rss_mib: r1(a5.rss / MiB),
      after5_heap_mib: r1(a5.heapUsed / MiB),
      after20_rss_mib: r1(a20.rss / MiB),
      after20_heap_mib: r1(a20.heapUsed / MiB),
      cpu_ms_per_stream: Math.round(((c1 - c0) / streams) * 100) / 100,
    });
    log(`${v.name}: at peak ${split(peak.atPeakRss)}; +5 s ${split(a5)}; +20 s ${split(a20)}`);
    await stop(node.child);
  }
  return rows;
}

try {
  const cpu = requests > 0 && rounds > 0 ? await cpuCase() : [];
  const mem = streams > 0 ? await memoryCase() : [];
  const bare = new Map(cpu.filter((r) => r.target === 'bare-proxy').map((r) => [r.mode, r.cpuMs / Math.max(1, r.requests)]));
  const lines: string[] = [];
  if (cpu.length > 0) {
    lines.push(`CPU per request (${rounds} rounds x ${requests} requests per target and mode, ${connections} connections, interleaved):`, '');
    lines.push('| target | mode | requests | failed | CPU µs/req | of which kernel | vs bare relay |', '|---|---|--:|--:|--:|--:|--:|');
    for (const r of cpu) {
      const us = (r.cpuMs * 1000) / Math.max(1, r.requests);
      lines.push(
        `| ${r.target} | ${r.mode} | ${r.requests} | ${r.failed} | ${Math.round(us)} | ${Math.round((r.sysMs * 1000) / Math.max(1, r.requests))} | ${(us / (bare.get(r.mode)! * 1000)).toFixed(2)}x |`,
      );
    }
    lines.push('');
  }
  if (mem.length > 0) {
    lines.push(`Memory: ${streams} concurrent streams of ${chunks} chunks ${chunkMs} ms apart, a fresh node per variant:`, '');
    lines.push(
      '| variant | completed | TTFB p50 ms | RSS idle | heap idle | RSS peak | heap peak | RSS +5 s | heap +5 s | RSS +20 s | heap +20 s | CPU ms/stream |',
    );
    lines.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
    for (const m of mem) {
      lines.push(
        `| ${m.variant} | ${m.completed} | ${m.ttfb_p50_ms} | ${m.idle_rss_mib} | ${m.idle_heap_mib} | ${m.peak_rss_mib} | ${m.peak_heap_mib} | ${m.after5_rss_mib} | ${m.after5_heap_mib} | ${m.after20_rss_mib} | ${m.after20_heap_mib} | ${m.cpu_ms_per_stream} |`,
      );
    }
    lines.push('', '(MiB)');
  }
  console.log(lines.join('\n'));
  if (values.json) console.log(JSON.stringify({ variants, cpu, memory: mem }));
} finally {
  for (const c of children.reverse()) await stop(c);
  rmSync(dir, { recursive: true, force: true });
}
