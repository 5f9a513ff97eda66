/**
 * Streaming capacity (issue 12): N concurrent streams of `chunks` tokens `chunkMs` apart, opened at once, straight to
 * a runtime-sim and through each proxy in front of it, one after the other in the same run: nginx (when an `nginx`
 * binary is on PATH; one worker, proxy_buffering off, upstream keepalive), the bare Node relay (bench/bare-proxy.ts)
 * and a data-plane node (limits raised so that none is refused). Reports completions, time to first byte, the p99 gap
 * between chunks, the relaying process's peak and after-the-run RSS (nginx: master + workers) and its CPU per
 * stream, and the kernel's listen-queue overflows during each case (a full accept queue drops connections, which
 * the client retries after 1 s). Its own sim and proxies (the main bench's sim answers with no token delay).
 *
 * Standalone: node bench/stream-capacity.ts [--streams 1000] [--stream-chunks 100] [--chunk-ms 50] [--json]
 *             [--rounds N] (every target N times, interleaved, the order reversed each round: medians)
 *             [--cpu-prof DIR] (each data plane's CPU profile, into DIR/<target>)
 *             [--only TARGET ...] (direct, nginx, bare-proxy, dataplane, dataplane@DIR: only these cases)
 *             [--dataplane-tree DIR ...] (another source tree's data plane as one more target, for an A/B in one run;
 *             each data plane runs from its bundle, built into DIR/apps/dataplane/dist by this tree's apps/dataplane/build.ts,
 *             with that tree's own Node flags and environment, apps/dataplane/src/node-flags.ts)
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildConnector, Pool } from 'undici';
import { configSnapshotSchema, generateSecret, hashSecret, secretDisplayPrefix, SECRET_PREFIX } from '@infer/shared';
import { Samples } from './load.ts';
import { buildDataplane } from '../apps/dataplane/build.ts';
import { acceptQueues, cpuMs, freePort, listenDrops, processTree, rssKiB, startCommand, startNode, waitReady, type Child } from './processes.ts';

export interface StreamCapacityOptions {
  readonly streams: number;
  readonly chunks: number;
  readonly chunkMs: number;
  /** Source trees whose data plane is measured as one more target each (an A/B of a change in one run). */
  readonly dataplaneTrees?: readonly string[];
  /** Only these targets (direct, nginx, bare-proxy, dataplane, dataplane@DIR); all of them when absent. */
  readonly only?: readonly string[];
  /** Times each target runs the case, interleaved (default 1); rows take the median of the rounds. */
  readonly rounds?: number;
  /** Each data plane started with `--cpu-prof`, its profile written into DIR/<target> when it stops. */
  readonly cpuProfDir?: string;
}

export interface StreamCapacityRow {
  /** direct, nginx, bare-proxy, dataplane, or `dataplane@DIR` for a --dataplane-tree. */
  readonly target: string;
  readonly streams: number;
  readonly completed: number;
  readonly ttfb_p50_ms: number;
  readonly ttfb_p99_ms: number;
  readonly chunk_gap_p99_ms: number;
  /** Streams whose first byte came 1 s or more after the request was sent (a dropped SYN is retried after 1 s); the most of any round. */
  readonly ttfb_over_1s: number;
  /** The process relaying the streams (the sim itself for direct; nginx: master + workers). */
  readonly peak_rss_mib: number | null;
  readonly idle_rss_mib: number | null;
  /** RSS 5 s after the last stream ended. */
  readonly after_rss_mib: number | null;
  /** RSS 20 s after (the data plane gives memory back once its load has stayed low for a few seconds: memory-reclaim.ts). */
  readonly after20_rss_mib: number | null;
  readonly cpu_ms_per_stream: number | null;
  /** TcpExt ListenOverflows during the case (whole machine: any listener whose accept queue was full). */
  readonly listen_overflows: number | null;
  readonly wall_s: number;
  /** Rounds measured (TTFB, chunk gap, CPU and wall time are their medians; memory is the first round's). */
  readonly rounds: number;
  readonly ttfb_p50_rounds_ms: readonly number[];
}

const MODEL = 'capacity-model';
const root = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));
const mib = (kib: number | null): number | null => (kib === null ? null : Math.round(kib / 102.4) / 10);
const round1 = (v: number): number => Math.round(v * 10) / 10;

/** An executable named `name` on PATH (or the usual sbin folders, where Debian puts nginx), or null. */
function onPath(name: string): string | null {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/sbin'];
  for (const d of dirs) if (d !== '' && existsSync(join(d, name))) return join(d, name);
  return null;
}

/**
 * A minimal reverse-proxy config for nginx: one worker (like the single-threaded Node relays), no daemon, every
 * path in `dir`, no access log, HTTP/1.1 with keepalive to the upstream and no response buffering (each chunk is
 * relayed as it comes). The listen backlog is nginx's default (511 on Linux), the same as Node's default.
 */
function nginxConfig(dir: string, port: number, upstreamPort: number, streams: number): string {
  const connections = streams * 2 + 256; // a client and an upstream connection per stream
  return `daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile ${connections + 64};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
${process.getuid?.() === 0 ? `user ${userInfo().username};` : ''}
events {
  worker_connections ${connections};
}
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream runtime {
    server 127.0.0.1:${upstreamPort};
    keepalive ${streams};
  }
  server {
    listen 127.0.0.1:${port};
    location = /healthz {
      return 200 '{"ok":true}';
    }
    location / {
      proxy_pass http://runtime;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
`;
}

async function openAll(
  url: string,
  path: string,
  headers: Record<string, string>,
  o: StreamCapacityOptions,
  chunks = o.chunks,
  streams = o.streams,
): Promise<{ completed: number; ttfb: Samples; gaps: Samples; connects: Samples; connectStarts: Samples; over1s: number }> {
  const connects = new Samples();
  // When the client began each connect, from the moment the streams were asked for (its own loop can lag behind).
  const connectStarts = new Samples();
  let asked = 0;
  const connect = buildConnector({});
  const pool = new Pool(url, {
    connections: streams,
    pipelining: 1,
    keepAliveTimeout: 10_000,
    // The client side's TCP connect times (a connect whose SYN the server's full accept queue dropped takes 1 s or more).
    connect: (opts, cb) => {
      const t = performance.now();
      connectStarts.add(t - asked);
      connect(opts, (...args) => {
        connects.add(performance.now() - t);
        cb(...args);
      });
    },
  });
  const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: chunks, messages: [{ role: 'user', content: 'Stream, slowly.' }] });
  const ttfb = new Samples();
  const gaps = new Samples();
  let completed = 0;
  let over1s = 0;
  const one = async (): Promise<void> => {
    const sent = performance.now();
    try {
      const res = await pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json', ...headers }, body });
      let last = 0;
      let tail = '';
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        const now = performance.now();
        if (last === 0) {
          ttfb.add(now - sent);
          if (now - sent >= 1000) over1s++;
        } else gaps.add(now - last);
        last = now;
        tail = (tail + chunk.toString('latin1')).slice(-64);
      }
      if (res.statusCode === 200 && tail.includes('[DONE]')) completed++;
    } catch {
      // counted as not completed
    }
  };
  asked = performance.now();
  await Promise.all(Array.from({ length: streams }, one));
  await pool.close();
  return { completed, ttfb, gaps, connects, connectStarts, over1s };
}

interface Target {
  readonly name: string;
  readonly url: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly proc: Child;
  /** Its processes now (nginx: master and workers). */
  readonly pids: () => number[];
  readonly ready: string;
}

const sum = (values: (number | null)[]): number | null => (values.some((v) => v === null) ? null : values.reduce<number>((a, v) => a + (v ?? 0), 0));

/** One case's figures (`runCase`); memory only when asked (the first round). */
type RoundResult = Omit<StreamCapacityRow, 'target' | 'streams' | 'rounds' | 'ttfb_p50_rounds_ms'>;

/** Opens the N streams through `c` once and measures them. */
async function runCase(c: Target, simPort: number, o: StreamCapacityOptions, withMemory: boolean, log: (line: string) => void): Promise<RoundResult> {
  log(`stream capacity: ${o.streams} streams of ${o.chunks} chunks ${o.chunkMs} ms apart, ${c.name}`);
  const rss = (): number | null => sum(c.pids().map(rssKiB));
  const cpu = (): number | null => sum(c.pids().map(cpuMs));
  const idle = rss();
  let peak = idle ?? 0;
  // The longest accept queue seen on the target's and the sim's listeners (a queue at its backlog drops SYNs).
  const ports = [Number(new URL(c.url).port), simPort];
  const queues = new Map<number, number>();
  const sampler = setInterval(() => {
    peak = Math.max(peak, rss() ?? 0);
    for (const [port, n] of acceptQueues(ports)) queues.set(port, Math.max(queues.get(port) ?? 0, n));
  }, 50);
  // The load generator's own event-loop delay: its timestamps are late by as much.
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const cpu0 = cpu();
  const drops0 = listenDrops();
  const t0 = performance.now();
  const r = await openAll(c.url, c.path, c.headers, o);
  const wall = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  lag.disable();
  const cpu1 = cpu();
  const drops1 = listenDrops();
  const q = (s: Samples, p: number): number => round1(s.percentile(p));
  log(
    `  ${c.name}: TTFB p10/p25/p50/p75/p90/p99 ${[10, 25, 50, 75, 90, 99].map((p) => q(r.ttfb, p)).join('/')} ms; ` +
      `client connects ${r.connects.count}, p50/p99/max ${q(r.connects, 50)}/${q(r.connects, 99)}/${q(r.connects, 100)} ms, ` +
      `begun p50/p90/max ${q(r.connectStarts, 50)}/${q(r.connectStarts, 90)}/${q(r.connectStarts, 100)} ms after the streams were asked for; ` +
      `load generator event-loop delay p50/p99/max ${[50, 99, 100].map((p) => round1(lag.percentile(p) / 1e6)).join('/')} ms; ` +
      `max accept queue ${c.name === 'direct' ? '' : `${c.name} ${queues.get(ports[0]!) ?? '?'}, `}sim ${queues.get(simPort) ?? '?'}; ` +
      `CPU ${cpu0 === null || cpu1 === null ? '?' : Math.round(((cpu1 - cpu0) / o.streams) * 100) / 100} ms/stream; ` +
      `ListenOverflows +${drops0 && drops1 ? drops1.overflows - drops0.overflows : '?'}, ListenDrops +${drops0 && drops1 ? drops1.drops - drops0.drops : '?'}`,
  );
  let after5: number | null = null;
  let after20: number | null = null;
  if (withMemory) {
    await sleep(5000);
    after5 = mib(rss());
    await sleep(15_000);
    after20 = mib(rss());
  } else {
    // The streams' connections close and the processes settle before the next case; past the sim's keep-alive
    // timeout (Node's 5 s), so that no proxy starts a case with upstream connections left idle by its last one (nginx
    // keeps them 60 s, the Node relays 4 s).
    await sleep(6000);
  }
  return {
    completed: r.completed,
    ttfb_p50_ms: q(r.ttfb, 50),
    ttfb_p99_ms: q(r.ttfb, 99),
    chunk_gap_p99_ms: q(r.gaps, 99),
    ttfb_over_1s: r.over1s,
    peak_rss_mib: withMemory ? mib(peak) : null,
    idle_rss_mib: withMemory ? mib(idle) : null,
    after_rss_mib: after5,
    after20_rss_mib: after20,
    cpu_ms_per_stream: cpu0 === null || cpu1 === null ? null : Math.round(((cpu1 - cpu0) / o.streams) * 100) / 100,
    listen_overflows: drops0 && drops1 ? drops1.overflows - drops0.overflows : null,
    wall_s: round1(wall),
  };
}

/** Runs the case direct and through each proxy in turn; starts and stops its own processes. */
export async function runStreamCapacity(o: StreamCapacityOptions, log: (line: string) => void): Promise<StreamCapacityRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'infer-capacity-'));
  const children: Child[] = [];
  try {
    const simPort = await freePort();
    const sim = startNode('capacity-sim', root('packages/runtime-sim/src/cli.ts'), [
      '--port',
      String(simPort),
      '--model',
      MODEL,
      '--itl-ms',
      String(o.chunkMs),
      '--batch-slots',
      String(o.streams * 2),
      '--max-queue',
      '0',
    ]);
    children.push(sim);
    const simUrl = `http://127.0.0.1:${simPort}`;
    const apiKey = generateSecret(SECRET_PREFIX.inference);
    const snapshot = configSnapshotSchema.parse({
      version: 1,
      tenants: [{ id: 'tenant-capacity', slug: 'capacity', rpmLimit: null, tpmLimit: null }],
      keys: [
        {
          id: 'key-capacity',
          tenantId: 'tenant-capacity',
          hash: hashSecret(apiKey),
          prefix: secretDisplayPrefix(apiKey),
          expiresAt: null,
          rpmLimit: null,
          tpmLimit: null,
        },
      ],
      endpoints: [
        {
          id: 'endpoint-capacity',
          name: MODEL,
          provider: 'bench',
          contextLength: 32768,
          concurrency: 1,
          coldStartSeconds: null,
          offeredShared: true,
          offeredDedicated: false,
          published: true,
          priceInputPerM: 0.1,
          priceOutputPerM: 0.2,
          upstreams: [{ id: 'replica-capacity', url: simUrl, kind: 'sim', servedModel: MODEL, apiKey: null }],
        },
      ],
      deployments: [],
    });
    const configFile = join(dir, 'snapshot.json');
    writeFileSync(configFile, JSON.stringify(snapshot), { mode: 0o600 });
    const single = (c: Child) => () => [c.pid];
    // Every proxy is started and warmed before the first case and stopped after its last (with rounds, the others idle
    // beside each case: an idle one takes no measurable CPU).
    const targets: (() => Promise<Target>)[] = [
      () =>
        Promise.resolve({ name: 'direct', url: simUrl, path: '/v1/chat/completions', headers: {}, proc: sim, pids: single(sim), ready: `${simUrl}/health` }),
    ];

    const nginx = onPath('nginx');
    if (nginx === null) {
      log('stream capacity: no nginx binary on PATH, nginx target skipped');
    } else {
      targets.push(async () => {
        const nginxDir = join(dir, 'nginx');
        mkdirSync(nginxDir);
        const port = await freePort();
        writeFileSync(join(nginxDir, 'nginx.conf'), nginxConfig(nginxDir, port, simPort, o.streams));
        const proc = startCommand('capacity-nginx', nginx, ['-p', `${nginxDir}/`, '-c', join(nginxDir, 'nginx.conf'), '-e', join(nginxDir, 'error.log')]);
        children.push(proc);
        const url = `http://127.0.0.1:${port}`;
        return { name: 'nginx', url, path: '/v1/chat/completions', headers: {}, proc, pids: () => processTree(proc.pid), ready: `${url}/healthz` };
      });
    }

    targets.push(async () => {
      const barePort = await freePort();
      // A 4th argument sizes the relay's upstream pool for every stream at once, where bare-proxy.ts reads one (else its 128).
      const bare = startNode('capacity-bare-proxy', root('bench/bare-proxy.ts'), [String(barePort), simUrl, MODEL, String(o.streams + 4)]);
      children.push(bare);
      const bareUrl = `http://127.0.0.1:${barePort}`;
      return { name: 'bare-proxy', url: bareUrl, path: '/v1/chat/completions', headers: {}, proc: bare, pids: single(bare), ready: `${bareUrl}/healthz` };
    });

    // Each data plane runs as in production: its bundle (apps/dataplane/build.ts, into the tree's own
    // apps/dataplane/dist/server.js), with the production Node flags and environment.
    const trees: { name: string; packageDir: string }[] = [
      { name: 'dataplane', packageDir: root('apps/dataplane') },
      ...(o.dataplaneTrees ?? []).map((t) => ({ name: `dataplane@${t}`, packageDir: join(resolve(t), 'apps/dataplane') })),
    ];
    for (const t of trees) {
      targets.push(async () => {
        const server = await buildDataplane(undefined, { packageDir: t.packageDir });
        // The tree's own production flags and environment (its src/node-flags.ts).
        const own = (await import(pathToFileURL(join(t.packageDir, 'src/node-flags.ts')).href)) as {
          DATAPLANE_NODE_FLAGS: readonly string[];
          DATAPLANE_NODE_ENV: Readonly<Record<string, string>>;
        };
        const dpPort = await freePort();
        const dataplane = startNode(
          `capacity-${t.name}`,
          server,
          [],
          {
            ...own.DATAPLANE_NODE_ENV,
            HOST: '127.0.0.1',
            PORT: String(dpPort),
            CONFIG_FILE: configFile,
            LOG_LEVEL: 'warn',
            METRICS_PORT: String(await freePort()),
            // Every stream admitted at once: REPLICA_BASE_CONCURRENCY x Concurrency 1 x 1 replica = N.
            REPLICA_BASE_CONCURRENCY: String(o.streams),
            QUEUE_MAX: '0',
          },
          o.cpuProfDir === undefined
            ? own.DATAPLANE_NODE_FLAGS
            : [...own.DATAPLANE_NODE_FLAGS, '--cpu-prof', '--cpu-prof-dir', join(resolve(o.cpuProfDir), t.name.replaceAll('/', '_'))],
        );
        children.push(dataplane);
        const url = `http://127.0.0.1:${dpPort}`;
        return {
          name: t.name,
          url,
          path: '/endpoints/v1/chat/completions',
          headers: { authorization: `Bearer ${apiKey}` },
          proc: dataplane,
          pids: single(dataplane),
          ready: `${url}/readyz`,
        };
      });
    }

    await waitReady(sim, `${simUrl}/health`);
    const live: Target[] = [];
    for (const start of targets) {
      const c = await start();
      if (o.only !== undefined && o.only.length > 0 && !o.only.includes(c.name)) {
        if (c.proc !== sim) c.proc.proc.kill('SIGTERM');
        continue;
      }
      await waitReady(c.proc, c.ready);
      // A few short streams first, so that every target runs compiled code with its pools made.
      const warm = await openAll(c.url, c.path, c.headers, o, 2, 16);
      if (warm.completed === 0) throw new Error(`stream capacity: ${c.name} completed no warm-up stream:\n${c.proc.output()}`);
      live.push(c);
    }

    // Rounds: every target once per round, the order reversed each round (each sees the machine as the others do);
    // the first round also measures memory (idle, peak, 5 s and 20 s after). A target's row takes the median of its
    // rounds for TTFB, chunk gaps and CPU.
    const rounds = o.rounds ?? 1;
    const measured = new Map<string, RoundResult[]>();
    for (let round = 0; round < rounds; round++) {
      for (const c of round % 2 === 0 ? live : [...live].reverse()) {
        await sleep(1000);
        const r = await runCase(c, simPort, o, round === 0, (line) => log(rounds > 1 ? `${line} (round ${round + 1} of ${rounds})` : line));
        measured.set(c.name, [...(measured.get(c.name) ?? []), r]);
        if (round === rounds - 1 && c.proc !== sim) {
          c.proc.proc.kill('SIGTERM');
          // A profiled node writes its profile as it exits: wait for that (up to 30 s).
          for (let i = 0; o.cpuProfDir !== undefined && i < 300 && !c.proc.exited(); i++) await sleep(100);
        }
      }
    }
    const rows: StreamCapacityRow[] = live.map((c) => {
      const rs = measured.get(c.name)!;
      const first = rs[0]!;
      const med = (pick: (r: RoundResult) => number | null): number | null => {
        const v = rs
          .map(pick)
          .filter((x): x is number => x !== null)
          .sort((a, b) => a - b);
        return v.length === 0 ? null : v.length % 2 === 1 ? v[(v.length - 1) / 2]! : round1((v[v.length / 2 - 1]! + v[v.length / 2]!) / 2);
      };
      return {
        target: c.name,
        streams: o.streams,
        completed: Math.min(...rs.map((r) => r.completed)),
        ttfb_p50_ms: med((r) => r.ttfb_p50_ms)!,
        ttfb_p99_ms: med((r) => r.ttfb_p99_ms)!,
        chunk_gap_p99_ms: med((r) => r.chunk_gap_p99_ms)!,
        ttfb_over_1s: Math.max(...rs.map((r) => r.ttfb_over_1s)),
        peak_rss_mib: first.peak_rss_mib,
        idle_rss_mib: first.idle_rss_mib,
        after_rss_mib: first.after_rss_mib,
        after20_rss_mib: first.after20_rss_mib,
        cpu_ms_per_stream: med((r) => r.cpu_ms_per_stream),
        listen_overflows: rs.some((r) => r.listen_overflows === null) ? null : rs.reduce((a, r) => a + (r.listen_overflows ?? 0), 0),
        wall_s: med((r) => r.wall_s)!,
        rounds: rs.length,
        ttfb_p50_rounds_ms: rs.map((r) => r.ttfb_p50_ms),
      };
    });
    return rows;
  } finally {
    for (const c of children) if (!c.exited()) c.proc.kill('SIGTERM');
    await sleep(300);
    for (const c of children) if (!c.exited()) c.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

export function renderCapacity(rows: readonly StreamCapacityRow[]): string {
  const cell = (v: number | null): string => (v === null ? '-' : String(v));
  return [
    '| target | streams | completed | TTFB p50 ms | TTFB p50 per round | TTFB p99 ms | TTFB ≥ 1 s | chunk gap p99 ms | RSS idle MiB | peak RSS MiB | RSS 5 s after MiB | RSS 20 s after MiB | CPU ms/stream | listen overflows | wall s |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows.map(
      (r) =>
        `| ${r.target} | ${r.streams} | ${r.completed} | ${r.ttfb_p50_ms} | ${r.ttfb_p50_rounds_ms.join(' / ')} | ${r.ttfb_p99_ms} | ${r.ttfb_over_1s} | ${r.chunk_gap_p99_ms} | ${cell(r.idle_rss_mib)} | ${cell(r.peak_rss_mib)} | ${cell(r.after_rss_mib)} | ${cell(r.after20_rss_mib)} | ${cell(r.cpu_ms_per_stream)} | ${cell(r.listen_overflows)} | ${r.wall_s} |`,
    ),
  ].join('\n');
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      streams: { type: 'string', default: '1000' },
      'stream-chunks': { type: 'string', default: '100' },
      'chunk-ms': { type: 'string', default: '50' },
      'dataplane-tree': { type: 'string', multiple: true, default: [] },
      only: { type: 'string', multiple: true, default: [] },
      rounds: { type: 'string', default: '1' },
      'cpu-prof': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const num = (name: string, raw: string): number => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got "${raw}"`);
    return n;
  };
  const o = {
    streams: num('streams', values.streams),
    chunks: num('stream-chunks', values['stream-chunks']),
    chunkMs: num('chunk-ms', values['chunk-ms']),
    dataplaneTrees: values['dataplane-tree'],
    only: values.only,
    rounds: num('rounds', values.rounds),
    cpuProfDir: values['cpu-prof'],
  };
  const rows = await runStreamCapacity(o, (line) => process.stderr.write(`${line}\n`));
  console.log(values.json ? JSON.stringify({ date: new Date().toISOString(), options: o, stream_capacity: rows }) : renderCapacity(rows));
  if (rows.some((r) => r.completed !== r.streams)) process.exitCode = 1;
}
