import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleChat, type ChatContext } from './handle-chat.ts';
import { readBody, sendError, sendJson, sendStatusError } from './http-io.ts';
import { effectiveColdStartMs, parseFaults, resolveSimOptions, type RuntimeSimOptions, type SimFaults } from './options.ts';
import { createKvCache } from './kv-cache.ts';
import { createPrefillLanes } from './prefill-lanes.ts';
import { createScheduler } from './scheduler.ts';
import { createSimStats, type SimGauges, type SimStatsSnapshot } from './sim-stats.ts';

export interface RuntimeSim {
  /** Listens (port 0 = ephemeral, host defaults to 127.0.0.1) and starts the cold-start clock. */
  listen(port?: number, host?: string): Promise<{ port: number; url: string }>;
  /** Stops listening and closes every open socket (in-flight requests count as aborted). */
  close(): Promise<void>;
  /** Replaces the active faults; `{}` clears them. Applies to requests that arrive afterwards. */
  setFaults(faults: SimFaults): void;
  getFaults(): SimFaults;
  stats(): SimStatsSnapshot;
  /** True once the cold start is over (`/health` answers 200). */
  readonly warm: boolean;
  /** Resolves when the sim is warm (after listen() and its cold start). */
  whenWarm(): Promise<void>;
  /** The underlying server (for tests that need socket-level access). */
  readonly server: Server;
}

const PROCESS_STARTED_AT = Math.round(performance.timeOrigin);

/** Creates a simulated OpenAI-compatible GPU runtime (vLLM-like); nothing listens until listen(). */
export function createRuntimeSim(input: RuntimeSimOptions = {}): RuntimeSim {
  const options = resolveSimOptions(input);
  const scheduler = createScheduler(options.batchSlots, options.maxQueue);
  const kv = createKvCache({ capacityTokens: options.kvCacheTokens, blockSize: options.kvBlockSize, prefixCaching: options.prefixCaching });
  const engine = { kv, prefill: createPrefillLanes(options.prefillLanes, options.prefillMsPerToken) };
  const stats = createSimStats(options.models, options.requestLogSize, kv);
  const coldStartMs = effectiveColdStartMs(options);
  let listenedAt: number | null = null;
  let warmAt: number | null = null;
  let markWarm: () => void = () => {};
  const warmPromise = new Promise<void>((resolve) => {
    markWarm = resolve;
  });
  const gauges = (): SimGauges => ({
    warm,
    running: scheduler.running,
    waiting: scheduler.waiting,
    peakRunning: scheduler.peakRunning,
    peakInFlight: scheduler.peakInFlight,
    listenedAt,
    warmAt,
    coldStartMs,
    pid: process.pid,
    processStartedAt: PROCESS_STARTED_AT,
  });
  const idPrefix = `chatcmpl-${randomBytes(6).toString('hex')}`;
  let counter = 0;
  let warm = false;
  let warmTimer: NodeJS.Timeout | undefined;
  const ctx: { -readonly [K in keyof ChatContext]: ChatContext[K] } = {
    options,
    scheduler,
    stats,
    engine,
    faults: options.faults,
    nextId: () => idPrefix + (counter++).toString(36),
  };
  const bearer = options.apiKey === null ? null : `Bearer ${options.apiKey}`;
  const modelsBody = JSON.stringify({
    object: 'list',
    data: options.models.map((id) => ({
      id,
      object: 'model',
      created: Math.floor(Date.now() / 1000),
      owned_by: 'runtime-sim',
      root: options.models[0],
      parent: null,
      max_model_len: options.maxContextLength,
      permission: [],
    })),
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    if (path.startsWith('/v1/') && bearer !== null && req.headers.authorization !== bearer) {
      return sendError(res, 'invalid_api_key', 'Unauthorized: missing or wrong bearer token');
    }
    switch (path) {
      case '/v1/chat/completions': {
        if (method !== 'POST') return sendError(res, 'method_not_allowed', 'use POST');
        const raw = await readBody(req, res, options.maxBodyBytes);
        if (raw !== null) handleChat(ctx, req, res, raw);
        return;
      }
      case '/v1/models':
        return sendJson(res, 200, modelsBody);
      case '/health':
        if (warm) return sendJson(res, 200, '{}');
        return sendError(res, 'service_unavailable', 'model is loading (cold start)');
      case '/metrics': {
        const f = ctx.faults;
        if (f.metricsHang === true) return;
        if (f.metricsErrorStatus !== undefined) return sendStatusError(res, f.metricsErrorStatus, 'runtime-sim injected fault on /metrics');
        const text = stats.renderMetrics(gauges());
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      case '/sim/stats':
        return sendJson(res, 200, JSON.stringify(sim.stats()));
      case '/sim/faults': {
        if (method === 'GET') return sendJson(res, 200, JSON.stringify({ faults: ctx.faults }));
        if (method !== 'POST') return sendError(res, 'method_not_allowed', 'use GET or POST');
        const raw = await readBody(req, res, options.maxBodyBytes);
        if (raw === null) return;
        try {
          sim.setFaults(parseFaults(raw.length === 0 ? {} : JSON.parse(raw.toString('utf8'))));
        } catch (err) {
          return sendError(res, 'invalid_request', err instanceof Error ? err.message : 'invalid faults');
        }
        return sendJson(res, 200, JSON.stringify({ faults: ctx.faults }));
      }
      default:
        return sendError(res, 'not_found', `no route for ${method} ${path}`);
    }
  }

  const server = createServer((req, res) => {
    route(req, res).catch(() => {
      if (!res.headersSent) sendError(res, 'internal_error', 'internal error');
      else res.destroy();
    });
  });

  const sim: RuntimeSim = {
    server,
    listen(port = 0, host = '127.0.0.1') {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        // A large accept queue: benchmarks open a thousand streams at once (Node's default 511 drops connects).
        server.listen({ port, host, backlog: 4096 }, () => {
          server.off('error', reject);
          const { port: bound } = server.address() as AddressInfo;
          const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
          listenedAt = Date.now();
          const becomeWarm = () => {
            warm = true;
            warmAt = Date.now();
            scheduler.open();
            markWarm();
          };
          if (coldStartMs > 0) warmTimer = setTimeout(becomeWarm, coldStartMs);
          else becomeWarm();
          resolve({ port: bound, url: `http://${shown}:${bound}` });
        });
      });
    },
    close() {
      clearTimeout(warmTimer);
      if (!server.listening) return Promise.resolve();
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
    setFaults(faults) {
      ctx.faults = parseFaults(faults);
    },
    getFaults: () => ctx.faults,
    stats: () => stats.snapshot(gauges()),
    get warm() {
      return warm;
    },
    whenWarm: () => warmPromise,
  };
  return sim;
}
