/** The gauges routing reads from a vLLM-style `/metrics` text, summed over label sets (engines, models). */
export interface ParsedReplicaMetrics {
  readonly waiting: number;
  readonly running: number;
  readonly kvUsage: number | null;
}

const WAITING = 'vllm:num_requests_waiting';
const RUNNING = 'vllm:num_requests_running';
const KV = 'vllm:kv_cache_usage_perc';
/** vLLM before v0.10 named it so. */
const KV_OLD = 'vllm:gpu_cache_usage_perc';

/** Reads the routing gauges; null when the text has neither queue gauge (not a vLLM-like runtime). */
export function parseReplicaMetrics(text: string): ParsedReplicaMetrics | null {
  let waiting = 0;
  let running = 0;
  let kv: number | null = null;
  let kvOld: number | null = null;
  let found = false;
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    // Only lines of the four families are looked at; comments and the rest are skipped at the first byte.
    if (text.charCodeAt(start) === 118 /* v */ && text.startsWith('vllm:', start)) {
      const line = text.slice(start, end);
      const brace = line.indexOf('{');
      const nameEnd = brace >= 0 ? brace : line.indexOf(' ');
      const name = nameEnd >= 0 ? line.slice(0, nameEnd) : line;
      if (name === WAITING || name === RUNNING || name === KV || name === KV_OLD) {
        const afterLabels = brace >= 0 ? line.indexOf('}', brace) + 1 : nameEnd;
        const value = Number.parseFloat(line.slice(afterLabels).trim().split(' ')[0] ?? '');
        if (Number.isFinite(value) && value >= 0) {
          if (name === WAITING) {
            waiting += value;
            found = true;
          } else if (name === RUNNING) {
            running += value;
            found = true;
          } else if (name === KV) kv = Math.max(kv ?? 0, value);
          else kvOld = Math.max(kvOld ?? 0, value);
        }
      }
    }
    start = end + 1;
  }
  if (!found) return null;
  return { waiting, running, kvUsage: kv ?? kvOld };
}
