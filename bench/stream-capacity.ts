/**
 * Streaming capacity (issue 12): N concurrent streams of `chunks` tokens `chunkMs` apart, opened at once, straight to
 * a runtime-sim and through a data-plane node in front of it (limits raised so that none is refused). Reports
 * completions, time to first byte, the p99 gap between chunks, the proxy's peak and after-the-run RSS and its CPU
 * per stream. Its own sim and node (the main bench's sim answers with no token delay).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { configSnapshotSchema, generateSecret, hashSecret, secretDisplayPrefix, SECRET_PREFIX } from '@infer/shared';
import { Samples } from './load.ts';
import { DATAPLANE_NODE_FLAGS } from '../apps/dataplane/src/node-flags.ts';
import { cpuMs, freePort, rssKiB, startNode, waitReady, type Child } from './processes.ts';

export interface StreamCapacityOptions {
  readonly streams: number;
  readonly chunks: number;
  readonly chunkMs: number;
}

export interface StreamCapacityRow {
  readonly target: 'direct' | 'dataplane';
  readonly streams: number;
  readonly completed: number;
  readonly ttfb_p50_ms: number;
  readonly ttfb_p99_ms: number;
  readonly chunk_gap_p99_ms: number;
  /** The process relaying the streams (the sim itself for direct). */
  readonly peak_rss_mib: number | null;
  readonly idle_rss_mib: number | null;
  /** RSS 5 s after the last stream ended. */
  readonly after_rss_mib: number | null;
  readonly cpu_ms_per_stream: number | null;
  readonly wall_s: number;
}

const MODEL = 'capacity-model';
const root = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));
const mib = (kib: number | null): number | null => (kib === null ? null : Math.round(kib / 102.4) / 10);

async function openAll(
  url: string,
  path: string,
  headers: Record<string, string>,
  o: StreamCapacityOptions,
): Promise<{ completed: number; ttfb: Samples; gaps: Samples }> {
  const pool = new Pool(url, { connections: o.streams, pipelining: 1, keepAliveTimeout: 10_000 });
  const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: o.chunks, messages: [{ role: 'user', content: 'Stream, slowly.' }] });
  const ttfb = new Samples();
  const gaps = new Samples();
  let completed = 0;
  const one = async (): Promise<void> => {
    const sent = performance.now();
    try {
      const res = await pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json', ...headers }, body });
      let last = 0;
      let tail = '';
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        const now = performance.now();
        if (last === 0) ttfb.add(now - sent);
        else gaps.add(now - last);
        last = now;
        tail = (tail + chunk.toString('latin1')).slice(-64);
      }
      if (res.statusCode === 200 && tail.includes('[DONE]')) completed++;
    } catch {
      // counted as not completed
    }
  };
  await Promise.all(Array.from({ length: o.streams }, one));
  await pool.close();
  return { completed, ttfb, gaps };
}

/** Runs the case direct and through a data plane; starts and stops its own processes. */
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
    const dpPort = await freePort();
    const dataplane = startNode(
      'capacity-dataplane',
      root('apps/dataplane/src/server.ts'),
      [],
      {
        HOST: '127.0.0.1',
        PORT: String(dpPort),
        CONFIG_FILE: configFile,
        LOG_LEVEL: 'warn',
        METRICS_PORT: String(await freePort()),
        // Every stream admitted at once: REPLICA_BASE_CONCURRENCY x Concurrency 1 x 1 replica = N.
        REPLICA_BASE_CONCURRENCY: String(o.streams),
        QUEUE_MAX: '0',
      },
      DATAPLANE_NODE_FLAGS,
    );
    children.push(dataplane);
    const dataplaneUrl = `http://127.0.0.1:${dpPort}`;
    await waitReady(sim, `${simUrl}/health`);
    await waitReady(dataplane, `${dataplaneUrl}/readyz`);

    const rows: StreamCapacityRow[] = [];
    const cases: { target: 'direct' | 'dataplane'; url: string; path: string; headers: Record<string, string>; proc: Child }[] = [
      { target: 'direct', url: simUrl, path: '/v1/chat/completions', headers: {}, proc: sim },
      { target: 'dataplane', url: dataplaneUrl, path: '/endpoints/v1/chat/completions', headers: { authorization: `Bearer ${apiKey}` }, proc: dataplane },
    ];
    for (const c of cases) {
      log(`stream capacity: ${o.streams} streams of ${o.chunks} chunks ${o.chunkMs} ms apart, ${c.target}`);
      const idle = rssKiB(c.proc.pid);
      let peak = idle ?? 0;
      const sampler = setInterval(() => {
        peak = Math.max(peak, rssKiB(c.proc.pid) ?? 0);
      }, 100);
      const cpu0 = cpuMs(c.proc.pid);
      const t0 = performance.now();
      const r = await openAll(c.url, c.path, c.headers, o);
      const wall = (performance.now() - t0) / 1000;
      clearInterval(sampler);
      const cpu1 = cpuMs(c.proc.pid);
      await sleep(5000);
      rows.push({
        target: c.target,
        streams: o.streams,
        completed: r.completed,
        ttfb_p50_ms: Math.round(r.ttfb.percentile(50) * 10) / 10,
        ttfb_p99_ms: Math.round(r.ttfb.percentile(99) * 10) / 10,
        chunk_gap_p99_ms: Math.round(r.gaps.percentile(99) * 10) / 10,
        peak_rss_mib: mib(peak),
        idle_rss_mib: mib(idle),
        after_rss_mib: mib(rssKiB(c.proc.pid)),
        cpu_ms_per_stream: cpu0 === null || cpu1 === null ? null : Math.round(((cpu1 - cpu0) / o.streams) * 100) / 100,
        wall_s: Math.round(wall * 10) / 10,
      });
    }
    return rows;
  } finally {
    for (const c of children) if (!c.exited()) c.proc.kill('SIGTERM');
    await sleep(200);
    rmSync(dir, { recursive: true, force: true });
  }
}

export function renderCapacity(rows: readonly StreamCapacityRow[]): string {
  const cell = (v: number | null): string => (v === null ? '-' : String(v));
  return [
    '| target | streams | completed | TTFB p50 ms | TTFB p99 ms | chunk gap p99 ms | RSS idle MiB | peak RSS MiB | RSS 5 s after MiB | CPU ms/stream | wall s |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows.map(
      (r) =>
        `| ${r.target} | ${r.streams} | ${r.completed} | ${r.ttfb_p50_ms} | ${r.ttfb_p99_ms} | ${r.chunk_gap_p99_ms} | ${cell(r.idle_rss_mib)} | ${cell(r.peak_rss_mib)} | ${cell(r.after_rss_mib)} | ${cell(r.cpu_ms_per_stream)} | ${r.wall_s} |`,
    ),
  ].join('\n');
}
