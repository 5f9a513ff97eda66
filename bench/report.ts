import { requestsPerSecond, type CaseStats } from './load.ts';

export type TargetName = 'direct' | 'dataplane' | 'bare-proxy';
export type Mode = 'json' | 'stream';

/** One measured case: where, what, how loaded, and what it saw. */
export interface CaseResult {
  readonly target: TargetName;
  readonly mode: Mode;
  /** `rate` cases are open-loop at `rate` req/s; `saturation` is closed-loop with `connections` senders. */
  readonly load: { readonly kind: 'rate'; readonly rate: number } | { readonly kind: 'saturation'; readonly connections: number };
  readonly stats: CaseStats;
  readonly cpu?: CaseCpu;
}

/** CPU time (user + system) per request of the case, in µs, of each process (null: not measured). */
export interface CaseCpu {
  /** The proxy in front of the runtime: the data plane, or the bare reference proxy. */
  readonly proxyUs: number | null;
  readonly simUs: number | null;
  readonly loadgenUs: number | null;
}

export interface SoakResult {
  readonly requests: number;
  readonly failures: number;
  /** Data-plane RSS right after it became ready, before any load. */
  readonly rssReadyKiB: number | null;
  readonly rssStartKiB: number | null;
  readonly rssEndKiB: number | null;
  /** Data-plane CPU time per soak request, µs. */
  readonly dataplaneCpuUs: number | null;
}

/**
 * CPU per request of the data plane and of the bare relay at saturation, from rounds that alternate the two (the
 * order flips each round), so that both see the same machine: on a shared, noisy host a single case each, minutes
 * apart, can move the ratio by a third either way.
 */
export interface InterleavedCpu {
  readonly rounds: number;
  readonly seconds_per_run: number;
  /** µs per request, summed over the rounds (total CPU over total requests). */
  readonly dataplane_us: Readonly<Record<Mode, number>>;
  readonly bare_proxy_us: Readonly<Record<Mode, number>>;
}

export interface Summary {
  readonly direct_rps: number;
  readonly dataplane_rps: number;
  readonly saturation_ratio: { readonly json: number; readonly stream: number };
  /** The reference floor (bare Node proxy) over direct, at saturation. */
  readonly bare_proxy_ratio: { readonly json: number; readonly stream: number };
  /**
   * The data plane's CPU per request over the bare relay's, at saturation (issue 12's targets: json 1.3, stream 1.5),
   * and what each costs per streamed chunk (the stream case's CPU per request over its chunks per response).
   */
  readonly cpu_vs_bare: { readonly json: number; readonly stream: number };
  /** Where `cpu_vs_bare` comes from: interleaved rounds (see InterleavedCpu), or null for the single saturation cases. */
  readonly cpu_interleaved: InterleavedCpu | null;
  readonly stream_cpu_us_per_chunk: { readonly dataplane: number | null; readonly bare_proxy: number | null; readonly chunks_per_response: number | null };
  readonly added_ms: readonly { readonly mode: Mode; readonly rate: number; readonly p50: number; readonly p99: number }[];
  readonly cases: readonly {
    readonly target: TargetName;
    readonly mode: Mode;
    readonly load: string;
    readonly requests: number;
    readonly rps: number;
    readonly p50_ms: number;
    readonly p99_ms: number;
    readonly ttfb_p50_ms: number | null;
    readonly ttfb_p99_ms: number | null;
    readonly non2xx: number;
    readonly errors: number;
    readonly proxy_cpu_us: number | null;
    readonly sim_cpu_us: number | null;
    readonly loadgen_cpu_us: number | null;
  }[];
  readonly failures: readonly string[];
}

const loadLabel = (c: CaseResult): string => (c.load.kind === 'rate' ? `${c.load.rate}/s open` : `${c.load.connections} conn closed`);
const round = (n: number, digits = 2): number => (Number.isFinite(n) ? Number(n.toFixed(digits)) : Number.NaN);
const ms = (n: number | null): string => (n === null || !Number.isFinite(n) ? '-' : n.toFixed(2));
const us = (n: number | null): string => (n === null ? '-' : n.toFixed(0));
const ratio = (a: number, b: number): number => (b > 0 ? round(a / b, 3) : Number.NaN);

function find(cases: readonly CaseResult[], target: TargetName, mode: Mode, load: CaseResult['load']): CaseResult | undefined {
  return cases.find(
    (c) =>
      c.target === target && c.mode === mode && c.load.kind === load.kind && (load.kind !== 'rate' || (c.load.kind === 'rate' && c.load.rate === load.rate)),
  );
}

/** Numbers for the table and for `--json`. */
export function summarize(
  cases: readonly CaseResult[],
  rates: readonly number[],
  connections: number,
  chunksPerResponse: number | null = null,
  interleaved: InterleavedCpu | null = null,
): Summary {
  const sat = { kind: 'saturation', connections } as const;
  const satCpu = (t: TargetName, m: Mode): number => {
    if (interleaved !== null && t !== 'direct') return (t === 'dataplane' ? interleaved.dataplane_us : interleaved.bare_proxy_us)[m];
    return find(cases, t, m, sat)?.cpu?.proxyUs ?? Number.NaN;
  };
  const perChunk = (t: TargetName): number | null => {
    const c = satCpu(t, 'stream');
    return chunksPerResponse === null || chunksPerResponse <= 0 || !Number.isFinite(c) ? null : round(c / chunksPerResponse, 1);
  };
  const satRps = (t: TargetName, m: Mode): number => {
    const c = find(cases, t, m, sat);
    return c ? requestsPerSecond(c.stats) : Number.NaN;
  };
  const added: { mode: Mode; rate: number; p50: number; p99: number }[] = [];
  for (const mode of ['json', 'stream'] as const) {
    for (const rate of rates) {
      const d = find(cases, 'direct', mode, { kind: 'rate', rate });
      const p = find(cases, 'dataplane', mode, { kind: 'rate', rate });
      if (!d || !p) continue;
      added.push({
        mode,
        rate,
        p50: round(p.stats.latency.percentile(50) - d.stats.latency.percentile(50)),
        p99: round(p.stats.latency.percentile(99) - d.stats.latency.percentile(99)),
      });
    }
  }
  return {
    direct_rps: round(satRps('direct', 'json'), 1),
    dataplane_rps: round(satRps('dataplane', 'json'), 1),
    saturation_ratio: {
      json: ratio(satRps('dataplane', 'json'), satRps('direct', 'json')),
      stream: ratio(satRps('dataplane', 'stream'), satRps('direct', 'stream')),
    },
    bare_proxy_ratio: {
      json: ratio(satRps('bare-proxy', 'json'), satRps('direct', 'json')),
      stream: ratio(satRps('bare-proxy', 'stream'), satRps('direct', 'stream')),
    },
    cpu_vs_bare: {
      json: ratio(satCpu('dataplane', 'json'), satCpu('bare-proxy', 'json')),
      stream: ratio(satCpu('dataplane', 'stream'), satCpu('bare-proxy', 'stream')),
    },
    cpu_interleaved: interleaved,
    stream_cpu_us_per_chunk: { dataplane: perChunk('dataplane'), bare_proxy: perChunk('bare-proxy'), chunks_per_response: chunksPerResponse },
    added_ms: added,
    cases: cases.map((c) => ({
      target: c.target,
      mode: c.mode,
      load: loadLabel(c),
      requests: c.stats.ok + c.stats.non2xx + c.stats.errors,
      rps: round(requestsPerSecond(c.stats), 1),
      p50_ms: round(c.stats.latency.percentile(50)),
      p99_ms: round(c.stats.latency.percentile(99)),
      ttfb_p50_ms: c.mode === 'stream' ? round(c.stats.ttfb.percentile(50)) : null,
      ttfb_p99_ms: c.mode === 'stream' ? round(c.stats.ttfb.percentile(99)) : null,
      non2xx: c.stats.non2xx,
      errors: c.stats.errors,
      proxy_cpu_us: c.cpu?.proxyUs == null ? null : round(c.cpu.proxyUs, 1),
      sim_cpu_us: c.cpu?.simUs == null ? null : round(c.cpu.simUs, 1),
      loadgen_cpu_us: c.cpu?.loadgenUs == null ? null : round(c.cpu.loadgenUs, 1),
    })),
    failures: cases.filter((c) => c.stats.firstFailure !== null).map((c) => `${c.target} ${c.mode} ${loadLabel(c)}: ${c.stats.firstFailure}`),
  };
}

/** The results as markdown: one table of cases, then the data-plane overhead. */
export function renderMarkdown(s: Summary, soak: SoakResult | null): string {
  const lines = [
    '| target | mode | load | requests | req/s | p50 ms | p99 ms | TTFB p50 | TTFB p99 | non-2xx | errors | proxy CPU µs/req | sim CPU µs/req | load-gen CPU µs/req |',
    '|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const c of s.cases) {
    lines.push(
      `| ${c.target} | ${c.mode} | ${c.load} | ${c.requests} | ${c.rps.toFixed(1)} | ${ms(c.p50_ms)} | ${ms(c.p99_ms)} | ${ms(c.ttfb_p50_ms)} | ${ms(c.ttfb_p99_ms)} | ${c.non2xx} | ${c.errors} | ${us(c.proxy_cpu_us)} | ${us(c.sim_cpu_us)} | ${us(c.loadgen_cpu_us)} |`,
    );
  }
  lines.push('', 'Data-plane overhead:', '');
  lines.push(`- saturation throughput, dataplane/direct: json ${s.saturation_ratio.json}, stream ${s.saturation_ratio.stream}`);
  if (Number.isFinite(s.bare_proxy_ratio.json)) {
    lines.push(`- reference floor, bare-proxy/direct: json ${s.bare_proxy_ratio.json}, stream ${s.bare_proxy_ratio.stream}`);
  }
  if (Number.isFinite(s.cpu_vs_bare.json)) {
    const i = s.cpu_interleaved;
    const how =
      i === null
        ? 'the saturation cases above'
        : `${i.rounds} interleaved rounds of ${i.seconds_per_run} s per target and mode, the order flipped each round: dataplane json ${us(i.dataplane_us.json)} µs, stream ${us(i.dataplane_us.stream)} µs; bare-proxy json ${us(i.bare_proxy_us.json)} µs, stream ${us(i.bare_proxy_us.stream)} µs`;
    lines.push(
      `- CPU per request at saturation, dataplane/bare-proxy (${how}): json ${s.cpu_vs_bare.json}x (target 1.3x), stream ${s.cpu_vs_bare.stream}x (target 1.5x)`,
    );
  }
  const pc = s.stream_cpu_us_per_chunk;
  if (pc.dataplane !== null) {
    lines.push(
      `- streaming CPU per chunk at saturation (${pc.chunks_per_response} SSE events per response): dataplane ${pc.dataplane} µs, bare-proxy ${pc.bare_proxy ?? '-'} µs`,
    );
  }
  for (const a of s.added_ms) lines.push(`- added latency at ${a.rate}/s, ${a.mode}: p50 +${ms(a.p50)} ms, p99 +${ms(a.p99)} ms`);
  if (soak) {
    const delta =
      soak.rssStartKiB !== null && soak.rssEndKiB !== null
        ? `${soak.rssEndKiB - soak.rssStartKiB >= 0 ? '+' : ''}${((soak.rssEndKiB - soak.rssStartKiB) / 1024).toFixed(1)} MiB`
        : 'n/a';
    const mib = (k: number | null): string => (k === null ? 'n/a' : `${(k / 1024).toFixed(1)} MiB`);
    lines.push(
      `- soak: ${soak.requests} requests through the data plane (${soak.failures} failed), data-plane RSS ${mib(soak.rssStartKiB)} -> ${mib(soak.rssEndKiB)} (${delta}; ${mib(soak.rssReadyKiB)} when idle after start-up; data-plane CPU ${us(soak.dataplaneCpuUs === null ? null : round(soak.dataplaneCpuUs, 1))} µs/request)`,
    );
  }
  if (s.failures.length > 0) {
    lines.push('', 'First failure per case:', '');
    for (const f of s.failures) lines.push(`- ${f.replace(/\s+/g, ' ')}`);
  }
  return lines.join('\n');
}
