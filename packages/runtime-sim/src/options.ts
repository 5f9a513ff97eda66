/** Faults a test can switch on; every field is optional and `{}` means "healthy". */
export interface SimFaults {
  /** Answer every chat request with this HTTP status and an OpenAI error body. */
  readonly errorStatus?: number;
  /** Probability (0..1) of answering with an error (errorStatus, or 500 when unset). */
  readonly errorRate?: number;
  /** Accept the request and never answer until the client goes away. */
  readonly hang?: boolean;
  /** Produce this many tokens, then stall forever (holding the slot). */
  readonly hangAfterTokens?: number;
  /** Produce this many tokens, then destroy the socket (no [DONE]). */
  readonly cutAfterTokens?: number;
  /** Extra inter-token latency in ms. */
  readonly slowTokenMs?: number;
  /** Answer `GET /metrics` with this HTTP status (a runtime whose metrics endpoint fails; chat is unaffected). */
  readonly metricsErrorStatus?: number;
  /** Accept `GET /metrics` and never answer (a scraper must time out; chat is unaffected). */
  readonly metricsHang?: boolean;
}

export interface RuntimeSimOptions {
  /** Served model names (aliases of one simulated model); the first is the default. */
  readonly models?: readonly string[];
  readonly maxContextLength?: number;
  /** Base time to first token, ms. */
  readonly ttftMs?: number;
  /** Extra prefill time per prompt token, ms. */
  readonly prefillMsPerToken?: number;
  /** Inter-token latency, ms. */
  readonly itlMs?: number;
  /** Concurrent generations. */
  readonly batchSlots?: number;
  /** Requests that may wait for a slot; beyond it the sim answers 503. */
  readonly maxQueue?: number;
  /** After listen(), /health is 503 and requests wait this long (a catalog entry's Cold Start TTFT). */
  readonly coldStartMs?: number;
  /**
   * Upper bound on the cold start actually simulated, ms (0: none). Local demos pass an entry's real
   * Cold Start TTFT (often minutes) as coldStartMs and cap it here to stay quick.
   */
  readonly coldStartCapMs?: number;
  /**
   * KV cache capacity in tokens. A running request holds blocks for its prompt and its completion; when too few
   * are free, requests wait (`vllm:num_requests_waiting`). `vllm:kv_cache_usage_perc` is the held share.
   */
  readonly kvCacheTokens?: number;
  /** Tokens per KV block (vLLM's default 16): the unit of allocation and of prefix matching. */
  readonly kvBlockSize?: number;
  /** Automatic prefix caching (default on, as in vLLM v1): cached prompt blocks are not prefilled again. */
  readonly prefixCaching?: boolean;
  /**
   * Prefills computed at once (default 1: one engine, so prefill work queues and an overloaded replica is
   * really slower; 0: unbounded, each prompt's prefill runs on its own clock).
   */
  readonly prefillLanes?: number;
  /** Inter-token latency added per other running request, ms (decode slows as the batch grows). */
  readonly itlPerRunningMs?: number;
  /** When set, /v1/* requests need `Authorization: Bearer <apiKey>`. */
  readonly apiKey?: string | null;
  /** How many finished requests stats() remembers. */
  readonly requestLogSize?: number;
  readonly maxBodyBytes?: number;
  readonly faults?: SimFaults;
}

export type ResolvedSimOptions = Readonly<Required<Omit<RuntimeSimOptions, 'faults' | 'apiKey'>>> & {
  readonly apiKey: string | null;
  readonly faults: SimFaults;
};

function num(name: string, value: number | undefined, fallback: number, min: number, integer: boolean): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || (integer && !Number.isInteger(value))) {
    throw new TypeError(`${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got ${String(value)}`);
  }
  return value;
}

function bool(name: string, value: boolean | undefined, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${String(value)}`);
  return value;
}

/** The cold start a sim really waits: `coldStartMs`, capped by `coldStartCapMs` when that is set. */
export const effectiveColdStartMs = (o: ResolvedSimOptions): number => (o.coldStartCapMs > 0 ? Math.min(o.coldStartMs, o.coldStartCapMs) : o.coldStartMs);

/** Validates options and fills defaults; throws a TypeError naming the bad option. */
export function resolveSimOptions(o: RuntimeSimOptions = {}): ResolvedSimOptions {
  const models = o.models && o.models.length > 0 ? [...o.models] : ['sim-model'];
  if (models.some((m) => typeof m !== 'string' || m.length === 0)) throw new TypeError('models must be non-empty strings');
  return Object.freeze({
    models: Object.freeze(models),
    maxContextLength: num('maxContextLength', o.maxContextLength, 32768, 1, true),
    ttftMs: num('ttftMs', o.ttftMs, 0, 0, false),
    prefillMsPerToken: num('prefillMsPerToken', o.prefillMsPerToken, 0, 0, false),
    itlMs: num('itlMs', o.itlMs, 0, 0, false),
    batchSlots: num('batchSlots', o.batchSlots, 64, 1, true),
    maxQueue: num('maxQueue', o.maxQueue, 1024, 0, true),
    coldStartMs: num('coldStartMs', o.coldStartMs, 0, 0, false),
    coldStartCapMs: num('coldStartCapMs', o.coldStartCapMs, 0, 0, false),
    kvCacheTokens: num('kvCacheTokens', o.kvCacheTokens, 262_144, 1, true),
    kvBlockSize: num('kvBlockSize', o.kvBlockSize, 16, 1, true),
    prefixCaching: bool('prefixCaching', o.prefixCaching, true),
    prefillLanes: num('prefillLanes', o.prefillLanes, 1, 0, true),
    itlPerRunningMs: num('itlPerRunningMs', o.itlPerRunningMs, 0, 0, false),
    requestLogSize: num('requestLogSize', o.requestLogSize, 1000, 1, true),
    maxBodyBytes: num('maxBodyBytes', o.maxBodyBytes, 16 * 1024 * 1024, 1, true),
    apiKey: o.apiKey ? o.apiKey : null,
    faults: parseFaults(o.faults ?? {}),
  });
}

const FAULT_KEYS = ['errorStatus', 'errorRate', 'hang', 'hangAfterTokens', 'cutAfterTokens', 'slowTokenMs', 'metricsErrorStatus', 'metricsHang'] as const;

/** Validates a faults object (from options or `POST /sim/faults`); throws a TypeError naming the field. */
export function parseFaults(input: unknown): SimFaults {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new TypeError('faults must be a JSON object');
  const src = input as Record<string, unknown>;
  for (const k of Object.keys(src)) {
    if (!(FAULT_KEYS as readonly string[]).includes(k)) throw new TypeError(`unknown fault "${k}" (known: ${FAULT_KEYS.join(', ')})`);
  }
  const out: { -readonly [K in keyof SimFaults]: SimFaults[K] } = {};
  const int = (k: 'errorStatus' | 'hangAfterTokens' | 'cutAfterTokens' | 'metricsErrorStatus', min: number, max: number) => {
    const v = src[k];
    if (v === undefined || v === null) return;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new TypeError(`${k} must be an integer in ${min}..${max}`);
    out[k] = v;
  };
  int('errorStatus', 400, 599);
  int('metricsErrorStatus', 400, 599);
  int('hangAfterTokens', 0, Number.MAX_SAFE_INTEGER);
  int('cutAfterTokens', 0, Number.MAX_SAFE_INTEGER);
  if (src['errorRate'] != null) {
    const v = src['errorRate'];
    if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw new TypeError('errorRate must be a number in 0..1');
    out.errorRate = v;
  }
  if (src['slowTokenMs'] != null) {
    const v = src['slowTokenMs'];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new TypeError('slowTokenMs must be a number >= 0');
    out.slowTokenMs = v;
  }
  for (const k of ['hang', 'metricsHang'] as const) {
    if (src[k] == null) continue;
    if (typeof src[k] !== 'boolean') throw new TypeError(`${k} must be a boolean`);
    if (src[k]) out[k] = true;
  }
  return Object.freeze(out);
}
