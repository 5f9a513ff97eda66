/**
 * `pnpm bench`: data-plane overhead against a zero-latency runtime simulator (or a given runtime).
 * Starts the sim and one data-plane node as child processes, measures direct vs through the data plane,
 * JSON and streaming, open-loop at fixed rates and closed-loop at saturation, and writes bench/RESULTS.md.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { chatMessages, runClosedLoop, runCount, runOpenLoop, type CaseStats, type RequestSpec } from './load.ts';
import { cpuMs, killChildren, rssKiB, type Child } from './processes.ts';
import { renderMarkdown, summarize, type CaseCpu, type InterleavedCpu, type CaseResult, type Mode, type SoakResult, type TargetName } from './report.ts';
import { startStack, BENCH_MODEL } from './stack.ts';
import { renderCapacity, runStreamCapacity } from './stream-capacity.ts';

interface Options {
  readonly durationS: number;
  readonly rates: readonly number[];
  readonly connections: number;
  readonly json: boolean;
  readonly upstream: string | null;
  readonly model: string;
  readonly upstreamKey: string | null;
  readonly soak: number;
  readonly cpuProf: string | null;
  /** Streaming capacity case: concurrent streams (0: skip), chunks per stream, ms between chunks. */
  readonly streams: number;
  readonly streamChunks: number;
  readonly chunkMs: number;
  /** Rounds of the streaming capacity case, every target once per round, interleaved (the rows take the medians). */
  readonly capacityRounds: number;
  /** Interleaved rounds of data plane and bare relay at saturation for the CPU ratio (0: the single cases). */
  readonly cpuRounds: number;
  /** Requests carry a conversation of about this many KiB (0: one short user message). */
  readonly promptKib: number;
}

const USAGE = `usage: pnpm bench [--duration 5] [--rates 500,2000] [--connections 64] [--json]
                  [--upstream URL --model NAME [--upstream-key KEY]] [--soak N] [--cpu-prof DIR]
                  [--streams 1000 (0: skip) --stream-chunks 100 --chunk-ms 50 --capacity-rounds 3] [--cpu-rounds 3 (0: single cases)]
                  [--prompt-kib 0 (N: each request carries a conversation of about N KiB)]`;

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      duration: { type: 'string', default: '5' },
      rates: { type: 'string', default: '500,2000' },
      connections: { type: 'string', default: '64' },
      json: { type: 'boolean', default: false },
      upstream: { type: 'string' },
      model: { type: 'string' },
      'upstream-key': { type: 'string' },
      soak: { type: 'string', default: '0' },
      'cpu-prof': { type: 'string' },
      streams: { type: 'string', default: '1000' },
      'stream-chunks': { type: 'string', default: '100' },
      'chunk-ms': { type: 'string', default: '50' },
      'cpu-rounds': { type: 'string', default: '3' },
      'capacity-rounds': { type: 'string', default: '3' },
      'prompt-kib': { type: 'string', default: '0' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const positive = (name: string, raw: string, integer: boolean, allowZero = false): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0 || (n === 0 && !allowZero) || (integer && !Number.isInteger(n))) {
      throw new Error(`--${name} must be a ${integer ? 'positive integer' : 'positive number'}, got "${raw}"\n${USAGE}`);
    }
    return n;
  };
  const rates = values.rates
    .split(',')
    .filter((r) => r.trim() !== '')
    .map((r) => positive('rates', r.trim(), false));
  if (values.upstream !== undefined && values.model === undefined) throw new Error(`--upstream needs --model NAME\n${USAGE}`);
  if (values.upstream !== undefined && !/^https?:\/\//.test(values.upstream)) throw new Error('--upstream must be an http(s) URL');
  return Object.freeze({
    durationS: positive('duration', values.duration, false),
    rates: Object.freeze(rates),
    connections: Math.min(positive('connections', values.connections, true), 4096),
    json: values.json,
    upstream: values.upstream?.replace(/\/+$/, '').replace(/\/v1$/, '') ?? null,
    model: values.model ?? 'sim-served-model',
    upstreamKey: values['upstream-key'] ?? null,
    soak: positive('soak', values.soak, true, true),
    cpuProf: values['cpu-prof'] ?? null,
    streams: positive('streams', values.streams, true, true),
    streamChunks: positive('stream-chunks', values['stream-chunks'], true),
    chunkMs: positive('chunk-ms', values['chunk-ms'], false, true),
    cpuRounds: positive('cpu-rounds', values['cpu-rounds'], true, true),
    capacityRounds: positive('capacity-rounds', values['capacity-rounds'], true),
    promptKib: positive('prompt-kib', values['prompt-kib'], true, true),
  });
}

function requestSpec(path: string, model: string, expect: string, stream: boolean, bearer: string | null, promptKib: number): RequestSpec {
  const body = Buffer.from(JSON.stringify({ model, messages: chatMessages(promptKib), max_tokens: 16, stream }));
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (bearer) headers['authorization'] = `Bearer ${bearer}`;
  return Object.freeze({ path, headers: Object.freeze(headers), body, stream, expect: Buffer.from(expect) });
}

/** SSE events (`data:` lines, `[DONE]` included) in one streamed answer through the data plane, for CPU per chunk. */
async function sseEventsPerResponse(baseUrl: string, spec: RequestSpec): Promise<number | null> {
  try {
    const res = await fetch(`${baseUrl}${spec.path}`, {
      method: 'POST',
      headers: spec.headers,
      body: new Uint8Array(spec.body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    return res.ok ? text.split('\n').filter((l) => l.startsWith('data:')).length : null;
  } catch {
    return null;
  }
}

const log = (msg: string): void => {
  process.stderr.write(`${msg}\n`);
};

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  const started = new Date();
  log(`starting ${opts.upstream ? `data plane -> ${opts.upstream}` : 'runtime-sim and data plane'} ...`);
  const stack = await startStack({ upstream: opts.upstream, servedModel: opts.model, upstreamKey: opts.upstreamKey, cpuProfDir: opts.cpuProf });

  const poolOpts = { connections: opts.connections, pipelining: 1, keepAliveTimeout: 30_000 };
  const pools: Record<TargetName, Pool> = {
    direct: new Pool(stack.upstreamUrl, poolOpts),
    dataplane: new Pool(stack.dataplaneUrl, poolOpts),
    'bare-proxy': new Pool(stack.bareProxyUrl, poolOpts),
  };
  const specs: Record<TargetName, Record<Mode, RequestSpec>> = {
    direct: {
      json: requestSpec('/v1/chat/completions', opts.model, opts.model, false, opts.upstreamKey, opts.promptKib),
      stream: requestSpec('/v1/chat/completions', opts.model, opts.model, true, opts.upstreamKey, opts.promptKib),
    },
    // The data plane must rewrite the served model name back to the catalog name: checked on every response.
    dataplane: {
      json: requestSpec('/endpoints/v1/chat/completions', BENCH_MODEL, BENCH_MODEL, false, stack.apiKey, opts.promptKib),
      stream: requestSpec('/endpoints/v1/chat/completions', BENCH_MODEL, BENCH_MODEL, true, stack.apiKey, opts.promptKib),
    },
    // The reference floor relays the runtime's bytes as they are (served name, upstream key passed on).
    'bare-proxy': {
      json: requestSpec('/v1/chat/completions', opts.model, opts.model, false, opts.upstreamKey, opts.promptKib),
      stream: requestSpec('/v1/chat/completions', opts.model, opts.model, true, opts.upstreamKey, opts.promptKib),
    },
  };

  const cases: CaseResult[] = [];
  // Every request that reached the data plane (warm-up, cases, soak) should yield one usage record.
  let dataplaneRequests = 0;
  const countSent = (target: TargetName, s: CaseStats): CaseStats => {
    if (target === 'dataplane') dataplaneRequests += s.ok + s.non2xx + s.errors;
    return s;
  };
  // CPU time the proxy in front (data plane or bare proxy), the simulator and the load generator itself spent
  // per request of a case (from /proc and process.cpuUsage).
  const measured = async (target: TargetName, run: () => Promise<CaseStats>): Promise<{ stats: CaseStats; cpu: CaseCpu }> => {
    const proxy = target === 'dataplane' ? stack.dataplane : target === 'bare-proxy' ? stack.bareProxy : null;
    const proxy0 = proxy ? cpuMs(proxy.pid) : null;
    const sim0 = stack.sim ? cpuMs(stack.sim.pid) : null;
    const gen0 = process.cpuUsage();
    const stats = await run();
    const gen = process.cpuUsage(gen0);
    const n = stats.ok + stats.non2xx + stats.errors;
    const perReq = (a: number | null, b: number | null): number | null => (a === null || b === null || n === 0 ? null : ((b - a) * 1000) / n);
    return {
      stats,
      cpu: {
        proxyUs: proxy ? perReq(proxy0, cpuMs(proxy.pid)) : null,
        simUs: stack.sim ? perReq(sim0, cpuMs(stack.sim.pid)) : null,
        loadgenUs: n === 0 ? null : (gen.user + gen.system) / n,
      },
    };
  };
  const chunksPerResponse = await sseEventsPerResponse(stack.dataplaneUrl, specs.dataplane.stream);
  dataplaneRequests++;
  const warmS = Math.min(1, opts.durationS / 5);
  for (const target of ['direct', 'dataplane', 'bare-proxy'] as const) {
    // The reference floor is measured at saturation only: what a do-nothing Node proxy reaches here now.
    const rates = target === 'bare-proxy' ? [] : opts.rates;
    for (const mode of ['json', 'stream'] as const) {
      const pool = pools[target];
      const spec = specs[target][mode];
      const warm = countSent(target, await runClosedLoop(pool, spec, Math.min(opts.connections, 16), warmS));
      if (warm.ok === 0) throw new Error(`${target} ${mode}: no correct response while warming up: ${warm.firstFailure ?? 'nothing answered'}`);
      for (const rate of rates) {
        log(`${target} ${mode} open loop ${rate}/s for ${opts.durationS}s`);
        const r = await measured(target, () => runOpenLoop(pool, spec, rate, opts.durationS));
        cases.push({ target, mode, load: { kind: 'rate', rate }, stats: countSent(target, r.stats), cpu: r.cpu });
      }
      log(`${target} ${mode} closed loop ${opts.connections} connections for ${opts.durationS}s`);
      const r = await measured(target, () => runClosedLoop(pool, spec, opts.connections, opts.durationS));
      cases.push({ target, mode, load: { kind: 'saturation', connections: opts.connections }, stats: countSent(target, r.stats), cpu: r.cpu });
    }
  }

  // The CPU ratio to the bare relay from rounds that alternate the two (see InterleavedCpu in report.ts).
  let interleaved: InterleavedCpu | null = null;
  if (opts.cpuRounds > 0) {
    const secondsPerRun = Math.max(1, opts.durationS / 2);
    const zero = (): { us: number; n: number } => ({ us: 0, n: 0 });
    const totals = { dataplane: { json: zero(), stream: zero() }, 'bare-proxy': { json: zero(), stream: zero() } };
    for (let r = 0; r < opts.cpuRounds; r++) {
      for (const mode of ['json', 'stream'] as const) {
        for (const target of r % 2 === 0 ? (['dataplane', 'bare-proxy'] as const) : (['bare-proxy', 'dataplane'] as const)) {
          const m = await measured(target, () => runClosedLoop(pools[target], specs[target][mode], opts.connections, secondsPerRun));
          const s = countSent(target, m.stats);
          if (s.non2xx + s.errors > 0) throw new Error(`${target} ${mode}: failures in the CPU rounds: ${s.firstFailure ?? ''}`);
          const t = totals[target][mode];
          t.us += (m.cpu.proxyUs ?? Number.NaN) * s.ok;
          t.n += s.ok;
        }
      }
      log(`cpu ratio: round ${r + 1}/${opts.cpuRounds} done`);
    }
    const perReq = (t: { us: number; n: number }): number => Math.round((t.us / t.n) * 10) / 10;
    interleaved = {
      rounds: opts.cpuRounds,
      seconds_per_run: secondsPerRun,
      dataplane_us: { json: perReq(totals.dataplane.json), stream: perReq(totals.dataplane.stream) },
      bare_proxy_us: { json: perReq(totals['bare-proxy'].json), stream: perReq(totals['bare-proxy'].stream) },
    };
  }

  const soak = opts.soak > 0 ? await runSoak(pools.dataplane, specs.dataplane, stack.dataplane, stack.dataplaneReadyRssKiB, opts) : null;
  if (soak) dataplaneRequests += soak.requests;
  await Promise.all(Object.values(pools).map((p) => p.close()));
  const { usageRecords: usage } = await stack.stop();

  // Streaming capacity: its own slow sim and proxies (nginx where installed), once the main stack is down.
  const capacity =
    opts.streams > 0
      ? await runStreamCapacity({ streams: opts.streams, chunks: opts.streamChunks, chunkMs: opts.chunkMs, rounds: opts.capacityRounds }, log)
      : null;
  const summary = summarize(cases, opts.rates, opts.connections, chunksPerResponse, interleaved);
  const table = renderMarkdown(summary, soak);
  const meteringLine = `Metering: the control-plane stub received ${usage} usage records for ${dataplaneRequests} data-plane requests (warm-up included)${usage === dataplaneRequests ? '' : ' (MISMATCH)'}.`;
  const machine = `${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'}), Node ${process.version}, ${process.platform}/${process.arch}`;
  const upstreamLine = opts.upstream
    ? `upstream ${opts.upstream} (model ${opts.model})`
    : 'upstream: runtime-sim, ttft 0, itl 0 (simulated responses; with no token delay a stream arrives at once, so TTFB is close to the full-stream time)';
  const optionLine = `duration ${opts.durationS}s per case, rates ${opts.rates.join(',') || 'none'} req/s (open loop, latency from the scheduled send time), saturation ${opts.connections} connections (closed loop), body: ${opts.promptKib > 0 ? `a conversation of about ${opts.promptKib} KiB (${chatMessages(opts.promptKib).length} messages)` : 'one user message'}, max_tokens 16`;
  const md = [
    '# Data-plane benchmark',
    '',
    `- date: ${started.toISOString()}`,
    `- machine: ${machine}`,
    `- ${upstreamLine}`,
    `- options: ${optionLine}${opts.soak > 0 ? `, soak ${opts.soak}` : ''}`,
    "- the load generator shares the machine's cores with the servers it measures; the control-plane stub that counts usage runs in its own process.",
    '- bare-proxy: a reference floor, not a product: node:http + undici relaying bytes with no auth, limits, metering, rewrite, metrics or timeouts (bench/bare-proxy.ts).',
    '',
    table,
    '',
    meteringLine,
    '',
    ...(capacity === null
      ? []
      : [
          `Streaming capacity: ${opts.streams} concurrent streams of ${opts.streamChunks} chunks ${opts.chunkMs} ms apart, opened at once, one target after the other, ${opts.capacityRounds} round${opts.capacityRounds === 1 ? '' : 's'} (every target once per round, the order reversed each round; TTFB, chunk gap, CPU and wall time are the medians of the rounds, memory is the first round's): direct to a runtime-sim, through nginx (when on PATH: 1 worker, proxy_buffering off, upstream keepalive), the bare Node relay and a data-plane node (REPLICA_BASE_CONCURRENCY ${opts.streams}, so none is refused); RSS and CPU of the process relaying them (the sim itself for direct; nginx: master + worker); listen overflows: the kernel's TcpExt ListenOverflows during the case (connections dropped by a full accept queue, retried by the client after 1 s):`,
          '',
          renderCapacity(capacity),
          '',
        ]),
  ].join('\n');
  // Sections other benches add (`## ...`, e.g. bench:routing's) are kept below this one's.
  const resultsUrl = new URL('./RESULTS.md', import.meta.url);
  const previous = existsSync(resultsUrl) ? readFileSync(resultsUrl, 'utf8') : '';
  const kept = previous.indexOf('\n## ') >= 0 ? previous.slice(previous.indexOf('\n## ')) : '';
  writeFileSync(resultsUrl, md + kept);

  if (opts.json) {
    const { upstreamKey: _secret, ...shownOptions } = opts;
    console.log(
      JSON.stringify({
        date: started.toISOString(),
        machine,
        options: shownOptions,
        ...summary,
        soak,
        stream_capacity: capacity,
        usage_records: usage,
        dataplane_requests: dataplaneRequests,
      }),
    );
  } else {
    console.log(`\n${table}\n\n${meteringLine}\n${capacity === null ? '' : `\n${renderCapacity(capacity)}\n`}\n(written to bench/RESULTS.md)`);
  }
  const failed =
    summary.cases.some((c) => c.non2xx + c.errors > 0) ||
    (soak !== null && soak.failures > 0) ||
    usage !== dataplaneRequests ||
    (capacity !== null && capacity.some((r) => r.completed !== r.streams));
  if (failed) {
    log(
      usage !== dataplaneRequests
        ? 'usage records do not match data-plane requests, or some requests failed'
        : 'some requests failed: see the non-2xx and errors columns',
    );
    process.exitCode = 1;
  }
}

async function runSoak(pool: Pool, specs: Record<Mode, RequestSpec>, dataplane: Child, rssReadyKiB: number | null, opts: Options): Promise<SoakResult> {
  log(`soak: ${opts.soak} requests through the data plane`);
  const rssStartKiB = rssKiB(dataplane.pid);
  const cpuStart = cpuMs(dataplane.pid);
  const half = Math.ceil(opts.soak / 2);
  const a = await runCount(pool, specs.json, opts.connections, half);
  const b = opts.soak - half > 0 ? await runCount(pool, specs.stream, opts.connections, opts.soak - half) : null;
  const rssEndKiB = rssKiB(dataplane.pid);
  const cpuEnd = cpuMs(dataplane.pid);
  const dataplaneCpuUs = cpuStart === null || cpuEnd === null ? null : ((cpuEnd - cpuStart) * 1000) / opts.soak;
  const failures = a.non2xx + a.errors + (b ? b.non2xx + b.errors : 0);
  return { requests: opts.soak, failures, rssReadyKiB, rssStartKiB, rssEndKiB, dataplaneCpuUs };
}

main().catch((err: unknown) => {
  killChildren();
  log(`bench: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
