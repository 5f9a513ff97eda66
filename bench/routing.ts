/**
 * `pnpm bench:routing`: the data plane's routing policies on one seeded workload (issue 12). Four runtime-sim
 * replicas with realistic timing (prefill per uncached token on one prefill lane, ITL growing with the batch, a
 * KV cache too small to hold every tenant's system prompt on every replica) behind one data-plane node; multi-
 * turn conversations of several tenants' prompt families (Zipf-distributed) arrive open-loop at a rate that keeps
 * the replicas busy. For each policy (random, round_robin, least_in_flight, scorer) fresh replicas and a fresh
 * node run the same schedule; the table shows TTFT, ITL, output tokens/s, the replicas' prefix-cache hit rate
 * (from their vllm:prefix_cache_* counters) and failures. `--json`: the last line is one JSON object.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { configSnapshotSchema, generateSecret, hashSecret, secretDisplayPrefix, SECRET_PREFIX } from '@infer/shared';
import { countPromptTokens } from '@infer/runtime-sim';
import { Samples } from './load.ts';
import { freePort, killChildren, startNode, waitReady, type Child } from './processes.ts';

const POLICIES = ['random', 'round_robin', 'least_in_flight', 'scorer'] as const;
type Policy = (typeof POLICIES)[number];
const MODEL = 'routing-bench';
const REPLICAS = 4;
const root = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));

/** The replicas' timing: about 6,700 prefill tokens/s each, 12 ms ITL plus 0.25 ms per other running request. */
const SIM_FLAGS = [
  '--ttft-ms',
  '15',
  '--prefill-ms-per-token',
  '0.15',
  '--prefill-lanes',
  '1',
  '--itl-ms',
  '12',
  '--itl-per-running-ms',
  '0.25',
  '--batch-slots',
  '64',
  '--max-queue',
  '4096',
  '--kv-cache-tokens',
  '16384',
  '--kv-block-size',
  '16',
];

interface Options {
  readonly durationS: number;
  readonly rate: number;
  readonly families: number;
  readonly seed: number;
  readonly json: boolean;
  readonly policies: readonly Policy[];
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      duration: { type: 'string', default: '20' },
      rate: { type: 'string', default: '3.2' },
      families: { type: 'string', default: '12' },
      seed: { type: 'string', default: '12' },
      policies: { type: 'string', default: POLICIES.join(',') },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  const usage = 'usage: pnpm bench:routing [--duration 20] [--rate 3.2 (conversations/s)] [--families 8] [--seed 12] [--policies a,b] [--json]';
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
  const num = (name: string, raw: string): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number\n${usage}`);
    return n;
  };
  const policies = values.policies.split(',').map((p) => p.trim()) as Policy[];
  for (const p of policies) if (!POLICIES.includes(p)) throw new Error(`unknown policy "${p}" (known: ${POLICIES.join(', ')})`);
  return {
    durationS: num('duration', values.duration),
    rate: num('rate', values.rate),
    families: Math.round(num('families', values.families)),
    seed: Math.round(num('seed', values.seed)),
    json: values.json,
    policies,
  };
}

// --- The seeded workload -------------------------------------------------------------------------------------

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'pa', 'qu', 'dy', 'fe', 'gi', 'ho', 'ja'];
const words = (r: () => number, n: number): string => {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const len = 1 + Math.floor(r() * 3);
    let w = '';
    for (let j = 0; j < len; j++) w += SYLLABLES[Math.floor(r() * SYLLABLES.length)];
    out.push(w);
  }
  return out.join(' ');
};

interface Turn {
  readonly user: string;
  readonly maxTokens: number;
  /** Pause after the previous answer, ms. */
  readonly thinkMs: number;
}

interface Conversation {
  readonly startMs: number;
  readonly family: number;
  readonly turns: readonly Turn[];
}

interface Workload {
  readonly systems: readonly string[];
  readonly conversations: readonly Conversation[];
}

/** Tenants' system prompts (1,600 to 3,000 tokens) and Poisson-arriving conversations picking one by Zipf (s = 1.1). */
function buildWorkload(o: Options): Workload {
  const r = rng(o.seed);
  const systems = Array.from({ length: o.families }, (_, f) => {
    const target = 1600 + Math.floor(r() * 1400);
    let text = `You are the assistant of tenant ${f}. Follow these rules. `;
    while (countPromptTokens([{ content: text }]) < target) text += `${words(r, 40)}. `;
    return text;
  });
  const weights = systems.map((_, i) => 1 / (i + 1) ** 1.1);
  const total = weights.reduce((a, b) => a + b, 0);
  const pickFamily = (): number => {
    let x = r() * total;
    for (let i = 0; i < weights.length; i++) if ((x -= weights[i]!) <= 0) return i;
    return weights.length - 1;
  };
  const conversations: Conversation[] = [];
  for (let t = 0; ;) {
    t += (-Math.log(1 - r()) / o.rate) * 1000;
    if (t > o.durationS * 1000) break;
    const n = 3 + Math.floor(r() * 4);
    const turns = Array.from({ length: n }, () => ({
      user: words(r, 15 + Math.floor(r() * 40)),
      maxTokens: 32 + Math.floor(r() * 64),
      thinkMs: 200 + r() * 800,
    }));
    conversations.push({ startMs: t, family: pickFamily(), turns });
  }
  return { systems, conversations };
}

// --- One policy's run ----------------------------------------------------------------------------------------

interface PolicyResult {
  readonly ttft_p50_ms: number;
  readonly ttft_p90_ms: number;
  readonly ttft_p99_ms: number;
  readonly itl_p50_ms: number;
  readonly output_tokens_per_s: number;
  readonly prefix_hit_rate: number;
  readonly failed: number;
  /** Not in the JSON: the node's routing decisions, for the log. */
  readonly notes?: string;
}

interface TurnOutcome {
  readonly ok: boolean;
  readonly text: string;
}

async function startFleet(
  policy: Policy,
  dir: string,
): Promise<{ dataplaneUrl: string; metricsUrl: string; simUrls: string[]; children: Child[]; apiKey: string }> {
  const children: Child[] = [];
  const simUrls: string[] = [];
  for (let i = 0; i < REPLICAS; i++) {
    const port = await freePort();
    children.push(startNode(`sim-${i}`, root('packages/runtime-sim/src/cli.ts'), ['--port', String(port), '--model', MODEL, ...SIM_FLAGS]));
    simUrls.push(`http://127.0.0.1:${port}`);
  }
  const apiKey = generateSecret(SECRET_PREFIX.inference);
  const snapshot = configSnapshotSchema.parse({
    version: 1,
    tenants: [{ id: 'tenant-bench', slug: 'bench', rpmLimit: null, tpmLimit: null }],
    keys: [
      {
        id: 'key-bench',
        tenantId: 'tenant-bench',
        hash: hashSecret(apiKey),
        prefix: secretDisplayPrefix(apiKey),
        expiresAt: null,
        rpmLimit: null,
        tpmLimit: null,
      },
    ],
    endpoints: [
      {
        id: 'endpoint-routing',
        name: MODEL,
        provider: 'bench',
        contextLength: 32768,
        concurrency: 4,
        coldStartSeconds: null,
        offeredShared: true,
        offeredDedicated: false,
        published: true,
        priceInputPerM: 0.1,
        priceOutputPerM: 0.2,
        upstreams: simUrls.map((url, i) => ({ id: `replica-${i}`, url, kind: 'sim', servedModel: MODEL, apiKey: null })),
      },
    ],
    deployments: [],
  });
  const configFile = join(dir, `snapshot-${policy}.json`);
  writeFileSync(configFile, JSON.stringify(snapshot), { mode: 0o600 });
  const port = await freePort();
  const metricsPort = await freePort();
  const dataplane = startNode(`dataplane-${policy}`, root('apps/dataplane/src/server.ts'), [], {
    HOST: '127.0.0.1',
    PORT: String(port),
    CONFIG_FILE: configFile,
    LOG_LEVEL: 'warn',
    METRICS_PORT: String(metricsPort),
    ROUTING_POLICY: policy,
  });
  children.push(dataplane);
  const dataplaneUrl = `http://127.0.0.1:${port}`;
  for (let i = 0; i < REPLICAS; i++) await waitReady(children[i]!, `${simUrls[i]}/health`);
  await waitReady(dataplane, `${dataplaneUrl}/readyz`);
  return { dataplaneUrl, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, simUrls, children, apiKey };
}

const CONTENT = '"content":"';

async function runPolicy(policy: Policy, w: Workload, dir: string): Promise<PolicyResult> {
  const fleet = await startFleet(policy, dir);
  // Let the node scrape every replica once before the clock starts (the scorer falls back until it has).
  await new Promise((r) => setTimeout(r, 600));
  const agent = new Agent({ connections: 512, keepAliveTimeout: 10_000 });
  const ttft = new Samples();
  const itl = new Samples();
  let failed = 0;
  let outputTokens = 0;
  let firstSend = Number.POSITIVE_INFINITY;
  let lastEnd = 0;

  const turn = async (messages: { role: string; content: string }[], maxTokens: number): Promise<TurnOutcome> => {
    const sent = performance.now();
    firstSend = Math.min(firstSend, sent);
    try {
      const res = await request(`${fleet.dataplaneUrl}/endpoints/v1/chat/completions`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${fleet.apiKey}` },
        body: JSON.stringify({ model: MODEL, messages, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } }),
      });
      if (res.statusCode !== 200) {
        await res.body.dump();
        return { ok: false, text: '' };
      }
      let buffer = '';
      let text = '';
      let last = 0;
      let done = false;
      let usage = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        const now = performance.now();
        buffer += chunk.toString('utf8');
        let i: number;
        while ((i = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          if (!event.startsWith('data: ')) continue;
          const data = event.slice(6);
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          if (data.includes(CONTENT)) {
            const piece = (JSON.parse(data) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '';
            if (last === 0) ttft.add(now - sent);
            else itl.add(now - last);
            last = now;
            text += piece;
          } else if (data.includes('"usage"')) {
            usage = (JSON.parse(data) as { usage: { completion_tokens: number } }).usage.completion_tokens;
          }
        }
      }
      lastEnd = Math.max(lastEnd, performance.now());
      if (!done || last === 0) return { ok: false, text };
      outputTokens += usage;
      return { ok: true, text };
    } catch {
      return { ok: false, text: '' };
    }
  };

  const conversation = async (c: Conversation): Promise<void> => {
    const history: { role: string; content: string }[] = [{ role: 'system', content: w.systems[c.family]! }];
    for (const t of c.turns) {
      await new Promise((r) => setTimeout(r, t.thinkMs));
      history.push({ role: 'user', content: t.user });
      const out = await turn(history, t.maxTokens);
      if (!out.ok) {
        failed++;
        return; // a broken conversation stops, like a user who gives up
      }
      history.push({ role: 'assistant', content: out.text });
    }
  };

  const start = performance.now();
  await Promise.all(
    w.conversations.map(async (c) => {
      const wait = c.startMs - (performance.now() - start);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await conversation(c);
    }),
  );
  let hits = 0;
  let queries = 0;
  for (const url of fleet.simUrls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    hits += Number(/^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? 0);
    queries += Number(/^vllm:prefix_cache_queries_total\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? 0);
  }
  // Why the node picked what it picked (scored, stale-metrics fallbacks...), and how requests spread.
  const decisions = new Map<string, number>();
  const perReplica = new Map<string, number>();
  for (const line of (await (await fetch(fleet.metricsUrl)).text()).split('\n')) {
    const m = /^dataplane_routing_decisions_total\{target="[^"]*",replica="([^"]*)",policy="([^"]*)",reason="([^"]*)"\} (\d+)/.exec(line);
    if (m === null) continue;
    const key = `${m[2]}/${m[3]}`;
    decisions.set(key, (decisions.get(key) ?? 0) + Number(m[4]));
    perReplica.set(m[1]!, (perReplica.get(m[1]!) ?? 0) + Number(m[4]));
  }
  const notes = `decisions ${[...decisions].map(([k, n]) => `${k}=${n}`).join(' ')}; per replica ${[...perReplica.values()].join('/')}`;
  await agent.close();
  for (const c of fleet.children) c.proc.kill('SIGTERM');
  await Promise.all(fleet.children.map((c) => new Promise<void>((r) => (c.exited() ? r() : c.proc.once('exit', () => r())))));
  const round = (n: number, d = 1): number => (Number.isFinite(n) ? Math.round(n * 10 ** d) / 10 ** d : -1);
  return {
    ttft_p50_ms: round(ttft.percentile(50)),
    ttft_p90_ms: round(ttft.percentile(90)),
    ttft_p99_ms: round(ttft.percentile(99)),
    itl_p50_ms: round(itl.percentile(50)),
    output_tokens_per_s: round(outputTokens / ((lastEnd - firstSend) / 1000)),
    prefix_hit_rate: round(queries === 0 ? 0 : hits / queries, 3),
    failed,
    notes,
  };
}

// --- Main ----------------------------------------------------------------------------------------------------

const o = parseOptions(process.argv.slice(2));
const w = buildWorkload(o);
const turns = w.conversations.reduce((n, c) => n + c.turns.length, 0);
const log = (line: string): void => console.log(line);
log(
  `routing bench: ${REPLICAS} runtime-sim replicas (${SIM_FLAGS.join(' ')}), ${w.conversations.length} conversations / ${turns} requests over ${o.durationS} s ` +
    `(${o.rate} conversations/s, ${o.families} prompt families, Zipf 1.1, seed ${o.seed})`,
);
const dir = mkdtempSync(join(tmpdir(), 'infer-routing-bench-'));
const results: Partial<Record<Policy, PolicyResult>> = {};
try {
  for (const p of o.policies) {
    const t0 = performance.now();
    results[p] = await runPolicy(p, w, dir);
    const { notes, ...r } = results[p];
    results[p] = r;
    log(`  ${p}: done in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${notes}`);
  }
} finally {
  killChildren();
  rmSync(dir, { recursive: true, force: true });
}
log('');
log('| policy | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | ITL p50 ms | output tokens/s | prefix-cache hit rate | failed |');
log('|---|--:|--:|--:|--:|--:|--:|--:|');
for (const p of o.policies) {
  const r = results[p]!;
  log(
    `| ${p} | ${r.ttft_p50_ms} | ${r.ttft_p90_ms} | ${r.ttft_p99_ms} | ${r.itl_p50_ms} | ${r.output_tokens_per_s} | ${(r.prefix_hit_rate * 100).toFixed(1)}% | ${r.failed} |`,
  );
}
const base = results.least_in_flight;
const scorer = results.scorer;
if (base && scorer) {
  log('');
  log(
    `scorer vs least_in_flight: TTFT p90 ${(base.ttft_p90_ms / scorer.ttft_p90_ms).toFixed(2)}x lower, throughput ${(scorer.output_tokens_per_s / base.output_tokens_per_s).toFixed(3)}x, failed ${scorer.failed}`,
  );
}
if (o.json) console.log(JSON.stringify({ policies: results }));
