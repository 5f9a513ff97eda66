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

/** Most of a metrics page read: the three gauges sit near the top of any sane exposition. */
export const MAX_METRICS_BYTES = 1 << 20;

/**
 * GET `${baseUrl}/metrics` of a replica the platform runs itself (local, Kubernetes); null when the runtime
 * exposes none. A redirect is an answer (never followed) and at most MAX_METRICS_BYTES are read. Replicas
 * at tenant-given addresses are scraped by their provisioner (`Provisioner.runtimeLoad`: external goes
 * through the address guard), never here.
 */
export async function scrapeRuntimeLoad(baseUrl: string, timeoutMs = 1_000): Promise<RuntimeLoad | null> {
  try {
    const res = await fetch(`${baseUrl}/metrics`, { redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      return null;
    }
    return parseRuntimeLoad(await readBounded(res.body, MAX_METRICS_BYTES));
  } catch {
    return null;
  }
}

/** The first `max` bytes of a body as UTF-8 (the rest is not read: the stream is cancelled). */
export async function readBounded(body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array> | null, max: number): Promise<string> {
  if (!body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  const iterable = body as AsyncIterable<Uint8Array>;
  for await (const chunk of iterable) {
    const room = max - size;
    chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
    size += Math.min(chunk.length, room);
    if (size >= max) break; // leaving the loop cancels the stream
  }
  return Buffer.concat(chunks).toString('utf8');
}
