// vLLM-compatible runtime metrics (runtime-sim exports the same names): the autoscaler's second input
// and the drain's per-replica "anything still running?" signal.

export interface RuntimeLoad {
  /** `vllm:num_requests_running`. */
  readonly running: number;
  /** `vllm:num_requests_waiting`. */
  readonly waiting: number;
  /** `vllm:kv_cache_usage_perc` (0..1), null when absent. */
  readonly kvCacheUsage: number | null;
}

const GAUGES = ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc'] as const;

/** Parses the three gauges out of a Prometheus text exposition (summed over label sets); null when neither count is there. */
export function parseRuntimeLoad(text: string): RuntimeLoad | null {
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+([-+0-9.eE]+|NaN)/.exec(line.trim());
    if (!m?.[1] || !(GAUGES as readonly string[]).includes(m[1])) continue;
    const v = Number(m[2]);
    if (Number.isFinite(v)) sums.set(m[1], (sums.get(m[1]) ?? 0) + v);
  }
  const running = sums.get('vllm:num_requests_running');
  const waiting = sums.get('vllm:num_requests_waiting');
  if (running === undefined && waiting === undefined) return null;
  return { running: running ?? 0, waiting: waiting ?? 0, kvCacheUsage: sums.get('vllm:kv_cache_usage_perc') ?? null };
}

/** GET `${baseUrl}/metrics` (short timeout); null when the runtime exposes none. */
export async function scrapeRuntimeLoad(baseUrl: string, timeoutMs = 1_000): Promise<RuntimeLoad | null> {
  try {
    const res = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    return res.ok ? parseRuntimeLoad(text.slice(0, 1 << 20)) : null;
  } catch {
    return null;
  }
}
