/** One request as the simulator saw it. */
export interface RequestLogEntry {
  /** The response id (chatcmpl-...). */
  id: string;
  model: string;
  stream: boolean;
  promptTokens: number;
  /** Prompt tokens found in the prefix cache (not prefilled again); 0 until the request gets a slot. */
  cachedTokens: number;
  /** Tokens generated so far (for an aborted request: up to the abort). */
  completionTokens: number;
  /** HTTP status sent, or 0 while none was sent (queued, running, hung, aborted early). */
  status: number;
  finishReason: 'stop' | 'length' | 'abort' | 'cut' | 'error' | null;
  aborted: boolean;
  /** Epoch ms of the client disconnect, or null. */
  abortedAt: number | null;
  startedAt: number;
  finishedAt: number | null;
}

/** The scheduler's and lifecycle's live figures that a snapshot or a scrape reports. */
export interface SimGauges {
  readonly warm: boolean;
  readonly running: number;
  readonly waiting: number;
  readonly peakRunning: number;
  readonly peakInFlight: number;
  /** Epoch ms of listen() and of the end of the cold start (null while cold or not listening). */
  readonly listenedAt: number | null;
  readonly warmAt: number | null;
  /** The cold start this sim waits after listen(), ms (after the cap). */
  readonly coldStartMs: number;
  /** The process serving it and the epoch ms it started (replica lifetimes measured from the process). */
  readonly pid: number;
  readonly processStartedAt: number;
}

export interface SimStatsSnapshot extends SimGauges {
  /** Share (0..1) of the KV cache the running requests' tokens fill. */
  readonly kvCacheUsage: number;
  readonly totals: {
    readonly requests: number;
    readonly completed: number;
    readonly aborted: number;
    /** 503s because the waiting queue was full. */
    readonly rejected: number;
    /** Injected faults: error answers and cut connections. */
    readonly failed: number;
    readonly promptTokens: number;
    readonly completionTokens: number;
    /** Prefix-cache lookups and hits, in prompt tokens (vLLM's counters). */
    readonly prefixCacheQueries: number;
    readonly prefixCacheHits: number;
  };
  /** The most recent requests, oldest first. */
  readonly requests: readonly RequestLogEntry[];
}

interface ModelCounters {
  prompt: number;
  generation: number;
  stop: number;
  length: number;
  abort: number;
}

export interface SimStats {
  begin(id: string, model: string, promptTokens: number, stream: boolean): RequestLogEntry;
  /** The request got a slot (and KV blocks): its prompt, less `cachedTokens`, is prefilled. */
  prefill(entry: RequestLogEntry, cachedTokens: number): void;
  /** `count` inter-token gaps of `seconds` each (JSON answers, whose tokens are not timed one by one). */
  interTokens(count: number, seconds: number): void;
  generated(entry: RequestLogEntry, tokens: number): void;
  finish(entry: RequestLogEntry, reason: 'stop' | 'length'): void;
  abort(entry: RequestLogEntry): void;
  reject(entry: RequestLogEntry, status: number): void;
  fail(entry: RequestLogEntry, status: number, reason: 'cut' | 'error'): void;
  snapshot(g: SimGauges): SimStatsSnapshot;
  renderMetrics(g: SimGauges): string;
}

/** `vllm:time_to_first_token_seconds` buckets (vLLM's own). */
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];

/** `vllm:inter_token_latency_seconds` buckets (vLLM's own). */
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];

interface Histogram {
  readonly bounds: readonly number[];
  readonly counts: number[];
  sum: number;
  count: number;
}

const histogram = (bounds: readonly number[]): Histogram => ({ bounds, counts: new Array<number>(bounds.length).fill(0), sum: 0, count: 0 });

function observe(h: Histogram, seconds: number, times = 1): void {
  h.sum += seconds * times;
  h.count += times;
  for (let i = 0; i < h.bounds.length; i++) if (seconds <= h.bounds[i]!) h.counts[i]! += times;
}

function renderHistogram(lines: string[], name: string, help: string, label: string, h: Histogram): void {
  lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
  h.bounds.forEach((b, i) => lines.push(`${name}_bucket{le="${b}",${label}} ${h.counts[i]}`));
  lines.push(`${name}_bucket{le="+Inf",${label}} ${h.count}`, `${name}_sum{${label}} ${h.sum}`, `${name}_count{${label}} ${h.count}`);
}

/** What the stats read from the KV cache. */
export interface KvView {
  usage(): number;
  readonly queriedTokens: number;
  readonly hitTokens: number;
}

/** Counters, per-model totals and a ring buffer of the last `logSize` requests. */
export function createSimStats(models: readonly string[], logSize: number, kv: KvView): SimStats {
  const ttft = histogram(TTFT_BUCKETS);
  const itl = histogram(ITL_BUCKETS);
  /** When each generating request produced its last token (performance.now()). */
  const lastToken = new WeakMap<RequestLogEntry, number>();
  const kvUsage = (): number => Math.min(1, kv.usage());
  const perModel = new Map<string, ModelCounters>(models.map((m) => [m, { prompt: 0, generation: 0, stop: 0, length: 0, abort: 0 }]));
  const log: RequestLogEntry[] = [];
  let next = 0;
  const t = { requests: 0, completed: 0, aborted: 0, rejected: 0, failed: 0, promptTokens: 0, completionTokens: 0 };
  const counters = (model: string) => perModel.get(model) ?? perModel.get(models[0]!)!;

  return {
    begin(id, model, promptTokens, stream) {
      const entry: RequestLogEntry = {
        id,
        model,
        stream,
        promptTokens,
        cachedTokens: 0,
        completionTokens: 0,
        status: 0,
        finishReason: null,
        aborted: false,
        abortedAt: null,
        startedAt: Date.now(),
        finishedAt: null,
      };
      t.requests++;
      if (log.length < logSize) log.push(entry);
      else log[next] = entry;
      next = (next + 1) % logSize;
      return entry;
    },
    prefill(entry, cachedTokens) {
      entry.cachedTokens = cachedTokens;
      t.promptTokens += entry.promptTokens;
      counters(entry.model).prompt += entry.promptTokens;
    },
    interTokens(count, seconds) {
      if (count > 0) observe(itl, seconds, count);
    },
    generated(entry, tokens) {
      if (tokens > 0) {
        const now = performance.now();
        if (entry.completionTokens === 0) observe(ttft, (Date.now() - entry.startedAt) / 1000);
        else if (tokens === 1) {
          const last = lastToken.get(entry);
          if (last !== undefined) observe(itl, (now - last) / 1000);
        }
        lastToken.set(entry, now);
      }
      entry.completionTokens += tokens;
      t.completionTokens += tokens;
      counters(entry.model).generation += tokens;
    },
    finish(entry, reason) {
      entry.status = 200;
      entry.finishReason = reason;
      entry.finishedAt = Date.now();
      t.completed++;
      counters(entry.model)[reason]++;
    },
    abort(entry) {
      entry.aborted = true;
      entry.finishReason = 'abort';
      entry.abortedAt = entry.finishedAt = Date.now();
      t.aborted++;
      counters(entry.model).abort++;
    },
    reject(entry, status) {
      entry.status = status;
      entry.finishReason = 'error';
      entry.finishedAt = Date.now();
      t.rejected++;
    },
    fail(entry, status, reason) {
      entry.status = status;
      entry.finishReason = reason;
      entry.finishedAt = Date.now();
      t.failed++;
    },
    snapshot(g) {
      const ordered = log.length < logSize ? log : [...log.slice(next), ...log.slice(0, next)];
      return {
        ...g,
        kvCacheUsage: kvUsage(),
        totals: { ...t, prefixCacheQueries: kv.queriedTokens, prefixCacheHits: kv.hitTokens },
        requests: ordered.map((e) => ({ ...e })),
      };
    },
    renderMetrics({ running, waiting }) {
      const first = JSON.stringify(models[0]);
      const lines: string[] = [
        '# HELP vllm:num_requests_running Number of requests in model execution batches.',
        '# TYPE vllm:num_requests_running gauge',
        `vllm:num_requests_running{model_name=${first}} ${running}`,
        '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
        '# TYPE vllm:num_requests_waiting gauge',
        `vllm:num_requests_waiting{model_name=${first}} ${waiting}`,
        '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
        '# TYPE vllm:kv_cache_usage_perc gauge',
        `vllm:kv_cache_usage_perc{model_name=${first}} ${kvUsage()}`,
        // Counted in tokens, as vLLM does: prompt tokens looked up, and those found cached.
        '# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.',
        '# TYPE vllm:prefix_cache_queries_total counter',
        `vllm:prefix_cache_queries_total{model_name=${first}} ${kv.queriedTokens}`,
        '# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.',
        '# TYPE vllm:prefix_cache_hits_total counter',
        `vllm:prefix_cache_hits_total{model_name=${first}} ${kv.hitTokens}`,
      ];
      renderHistogram(lines, 'vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', `model_name=${first}`, ttft);
      renderHistogram(lines, 'vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', `model_name=${first}`, itl);
      const counter = (name: string, help: string, value: (c: ModelCounters) => number) => {
        lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
        for (const [m, c] of perModel) lines.push(`${name}{model_name=${JSON.stringify(m)}} ${value(c)}`);
      };
      counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.', (c) => c.prompt);
      counter('vllm:generation_tokens_total', 'Number of generation tokens processed.', (c) => c.generation);
      counter('vllm:num_aborted_requests_total', 'Number of requests aborted by the client.', (c) => c.abort);
      lines.push('# HELP vllm:request_success_total Count of finished requests by finish reason.', '# TYPE vllm:request_success_total counter');
      for (const [m, c] of perModel) {
        for (const r of ['stop', 'length', 'abort'] as const) {
          lines.push(`vllm:request_success_total{finished_reason="${r}",model_name=${JSON.stringify(m)}} ${c[r]}`);
        }
      }
      return `${lines.join('\n')}\n`;
    },
  };
}
