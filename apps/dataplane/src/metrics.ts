import { monitorEventLoopDelay } from 'node:perf_hooks';
import { memoryUsage } from 'node:process';
import type { ConfigStore } from './config/config-store.ts';

/** Why a runtime request failed or was retried (a closed set: label values stay bounded). */
export type RuntimeFailure = 'connect' | 'status_5xx' | 'status_503' | 'first_byte_timeout' | 'idle_timeout' | 'cut' | 'bad_answer';

/**
 * Counters, gauges and histograms for `/metrics`. Recording is a Map lookup on a small key and a few
 * additions; the text is built only when scraped.
 */
export interface DataplaneMetrics {
  countRequest(route: string, mode: string, status: number, endpoint?: string): void;
  /** One finished chat request that reached a runtime (or tried to). */
  observeChat(mode: string, endpoint: string, ttftMs: number | null, latencyMs: number, promptTokens: number, completionTokens: number): void;
  inFlightInc(): void;
  inFlightDec(): void;
  /** Chat requests in flight now (the gauge's value). */
  inFlightNow(): number;
  runtimeError(reason: RuntimeFailure): void;
  retry(reason: RuntimeFailure): void;
  /** A replica was ejected (labelled by its upstream/replica id, never its address). */
  ejection(upstreamId: string): void;
  /** Drops the per-replica series of replicas no longer in the snapshot (scale-to-zero churns replica ids). */
  retainReplicas(ids: ReadonlySet<string>): void;
  /** The Redis circuit breaker changed state (only nodes with Redis report it). */
  redisBreaker(open: boolean): void;
  /** Adds families rendered by another module (routing) at each scrape. */
  section(render: (lines: string[]) => void): void;
  render(): string;
}

/** A Prometheus label value, escaped. */
export const escapeLabel = (v: string): string => v.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));

// Seconds. Proxy overhead sits in the low buckets; generation times in the high ones.
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

interface Histogram {
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

const newHistogram = (): Histogram => ({ counts: new Float64Array(BUCKETS.length), sum: 0, count: 0 });

function observe(h: Histogram, seconds: number): void {
  h.sum += seconds;
  h.count++;
  for (let i = 0; i < BUCKETS.length; i++) {
    if (seconds <= BUCKETS[i]!) {
      h.counts[i]!++;
      return;
    }
  }
}

function renderHistogram(lines: string[], name: string, labels: string, h: Histogram): void {
  let cumulative = 0;
  const sep = labels === '' ? '' : ',';
  for (let i = 0; i < BUCKETS.length; i++) {
    cumulative += h.counts[i]!;
    lines.push(`${name}_bucket{${labels}${sep}le="${BUCKETS[i]}"} ${cumulative}`);
  }
  lines.push(`${name}_bucket{${labels}${sep}le="+Inf"} ${h.count}`);
  lines.push(`${name}_sum{${labels}} ${h.sum}`);
  lines.push(`${name}_count{${labels}} ${h.count}`);
}

const bump = (m: Map<string, number>, key: string, by = 1): void => {
  m.set(key, (m.get(key) ?? 0) + by);
};

const SEP = '\u0000';

/**
 * A map key of label values (joined by NUL), reusing the last key built when called again with the same values: on
 * the request path that is the usual case (one endpoint, one outcome), and then no string is built or hashed.
 */
export function labelKeyJoiner(): (a: string, b: string, c?: string, d?: string | number) => string {
  let la: string | undefined;
  let lb: string | undefined;
  let lc: string | undefined;
  let ld: string | number | undefined;
  let last = '';
  return (a, b, c, d) => {
    if (a === la && b === lb && c === lc && d === ld) return last;
    la = a;
    lb = b;
    lc = c;
    ld = d;
    last = c === undefined ? `${a}${SEP}${b}` : d === undefined ? `${a}${SEP}${b}${SEP}${c}` : `${a}${SEP}${b}${SEP}${c}${SEP}${d}`;
    return last;
  };
}

const LOOP_RESOLUTION_MS = 10;
/** A sampled interval (ns, which includes the sampling period itself) as a delay in seconds. */
const loopDelaySeconds = (ns: number): number => Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS) / 1000;

/** Hand-rolled Prometheus registry for the data plane. */
export function createMetrics(store: ConfigStore): DataplaneMetrics {
  const requests = new Map<string, number>();
  const promptTokens = new Map<string, number>();
  const completionTokens = new Map<string, number>();
  const ttft = new Map<string, Histogram>();
  const latency = new Map<string, Histogram>();
  const errors = new Map<string, number>();
  const retries = new Map<string, number>();
  const ejections = new Map<string, number>();
  let inFlight = 0;
  const sections: ((lines: string[]) => void)[] = [];
  /** -1: no Redis on this node (the family is left out). */
  let breakerOpen = -1;
  let breakerOpens = 0;
  let configAppliedAt = store.view !== null ? Date.now() : 0;
  store.onVersion(() => {
    configAppliedAt = Date.now();
  });
  // Event-loop delay (GC pauses, long synchronous work): what every request on this node waited on top.
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();

  const requestKey = labelKeyJoiner();
  const chatKey = labelKeyJoiner();

  const histogram = (m: Map<string, Histogram>, key: string): Histogram => {
    let h = m.get(key);
    if (h === undefined) {
      h = newHistogram();
      m.set(key, h);
    }
    return h;
  };

  return {
    countRequest(route, mode, status, endpoint = '') {
      bump(requests, requestKey(route, mode, endpoint, status));
    },
    observeChat(mode, endpoint, ttftMs, latencyMs, prompt, completion) {
      const key = chatKey(mode, endpoint);
      if (ttftMs !== null) observe(histogram(ttft, mode), ttftMs / 1000);
      observe(histogram(latency, mode), latencyMs / 1000);
      if (prompt > 0) bump(promptTokens, key, prompt);
      if (completion > 0) bump(completionTokens, key, completion);
    },
    inFlightInc() {
      inFlight++;
    },
    inFlightDec() {
      inFlight--;
    },
    inFlightNow: () => inFlight,
    runtimeError(reason) {
      bump(errors, reason);
    },
    retry(reason) {
      bump(retries, reason);
    },
    redisBreaker(open) {
      if (open && breakerOpen !== 1) breakerOpens++;
      breakerOpen = open ? 1 : 0;
    },
    ejection(upstreamId) {
      bump(ejections, upstreamId);
    },
    retainReplicas(ids) {
      for (const id of ejections.keys()) if (!ids.has(id)) ejections.delete(id);
    },
    section(render) {
      sections.push(render);
    },
    render() {
      const lines: string[] = [];
      const family = (name: string, type: string, help: string): void => {
        lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      };
      family('dataplane_requests_total', 'counter', 'Requests answered, by route, mode, endpoint and HTTP status.');
      for (const [key, n] of requests) {
        const [route = '', mode = '', endpoint = '', status = ''] = key.split(SEP);
        const ep = endpoint === '' ? '' : `endpoint="${escapeLabel(endpoint)}",`;
        lines.push(`dataplane_requests_total{route="${escapeLabel(route)}",mode="${escapeLabel(mode)}",${ep}status="${status}"} ${n}`);
      }
      family('dataplane_time_to_first_token_seconds', 'histogram', 'Time from request start to the first byte of the runtime answer.');
      for (const [mode, h] of ttft) renderHistogram(lines, 'dataplane_time_to_first_token_seconds', `mode="${escapeLabel(mode)}"`, h);
      family('dataplane_request_duration_seconds', 'histogram', 'Total latency of chat requests, until the last byte.');
      for (const [mode, h] of latency) renderHistogram(lines, 'dataplane_request_duration_seconds', `mode="${escapeLabel(mode)}"`, h);
      for (const [name, m, help] of [
        ['dataplane_prompt_tokens_total', promptTokens, 'Prompt tokens metered, by mode and endpoint.'],
        ['dataplane_completion_tokens_total', completionTokens, 'Completion tokens metered, by mode and endpoint.'],
      ] as const) {
        family(name, 'counter', help);
        for (const [key, n] of m) {
          const [mode = '', endpoint = ''] = key.split(SEP);
          lines.push(`${name}{mode="${escapeLabel(mode)}",endpoint="${escapeLabel(endpoint)}"} ${n}`);
        }
      }
      family('dataplane_in_flight_requests', 'gauge', 'Chat requests being forwarded now.');
      lines.push(`dataplane_in_flight_requests ${inFlight}`);
      family('dataplane_runtime_errors_total', 'counter', 'Failed runtime requests, by reason.');
      for (const [reason, n] of errors) lines.push(`dataplane_runtime_errors_total{reason="${reason}"} ${n}`);
      family('dataplane_retries_total', 'counter', 'Requests retried on another replica, by reason.');
      for (const [reason, n] of retries) lines.push(`dataplane_retries_total{reason="${reason}"} ${n}`);
      family('dataplane_replica_ejections_total', 'counter', 'Replicas taken out of rotation by outlier detection, by upstream/replica id.');
      for (const [id, n] of ejections) lines.push(`dataplane_replica_ejections_total{upstream="${escapeLabel(id)}"} ${n}`);
      if (breakerOpen >= 0) {
        family('dataplane_redis_breaker_open', 'gauge', '1 while the Redis circuit breaker is open (limits fail open to this node), else 0.');
        lines.push(`dataplane_redis_breaker_open ${breakerOpen}`);
        family('dataplane_redis_breaker_opens_total', 'counter', 'Times the Redis circuit breaker opened.');
        lines.push(`dataplane_redis_breaker_opens_total ${breakerOpens}`);
      }
      for (const render of sections) render(lines);
      family('dataplane_config_version', 'gauge', 'Version of the config snapshot in use (-1 before the first).');
      lines.push(`dataplane_config_version ${store.version ?? -1}`);
      family('dataplane_config_age_seconds', 'gauge', 'Seconds since the last config snapshot or delta was applied (-1 before the first).');
      lines.push(`dataplane_config_age_seconds ${configAppliedAt === 0 ? -1 : (Date.now() - configAppliedAt) / 1000}`);
      family(
        'dataplane_event_loop_delay_seconds',
        'gauge',
        'Event-loop delay since the previous scrape (10 ms sampling), by quantile; quantile="1" is the maximum.',
      );
      if (loopDelay.count > 0) {
        for (const q of [0.5, 0.99]) lines.push(`dataplane_event_loop_delay_seconds{quantile="${q}"} ${loopDelaySeconds(loopDelay.percentile(q * 100))}`);
        lines.push(`dataplane_event_loop_delay_seconds{quantile="1"} ${loopDelaySeconds(loopDelay.max)}`);
      }
      loopDelay.reset();
      const mem = memoryUsage();
      family('dataplane_resident_memory_bytes', 'gauge', 'Resident set size of the process.');
      lines.push(`dataplane_resident_memory_bytes ${mem.rss}`);
      family('dataplane_heap_used_bytes', 'gauge', 'V8 heap in use.');
      lines.push(`dataplane_heap_used_bytes ${mem.heapUsed}`);
      return `${lines.join('\n')}\n`;
    },
  };
}
