import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { hashSecret } from '@infer/shared';
import type { ConfigSnapshot, SnapshotUpstream, UsageRecord } from '@infer/shared';
import { createRuntimeSim } from '@infer/runtime-sim';
import type { RuntimeSim, RuntimeSimOptions } from '@infer/runtime-sim';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { buildDataplaneApp, createConfigStore } from '../src/index.ts';
import type { ConfigStore, DataplaneAppOptions, UsageSink } from '../src/index.ts';

export const SECRET_A = 'infk_test_tenant_a_key_0000000000000';
export const SECRET_B = 'infk_test_tenant_b_key_0000000000000';
export const SECRET_EXPIRED = 'infk_test_expired_key_00000000000000';
export const NAME = 'llama-3-8b-instruct';
export const SERVED = 'sim-llama';

export interface StartedSim {
  readonly sim: RuntimeSim;
  readonly url: string;
}

export async function startSim(opts: RuntimeSimOptions = {}): Promise<StartedSim> {
  const sim = createRuntimeSim({ models: [SERVED], ...opts });
  const { url } = await sim.listen(0);
  return { sim, url };
}

/** A port nothing listens on (bound and released). */
export async function deadUrl(): Promise<string> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

const upstream = (id: string, url: string, servedModel = SERVED): SnapshotUpstream => ({ id, url, kind: 'sim', servedModel, apiKey: null });

const endpoint = (id: string, name: string, upstreams: SnapshotUpstream[], extra: { published?: boolean; offeredShared?: boolean } = {}) => ({
  id,
  name,
  provider: 'meta',
  contextLength: 8192,
  concurrency: 1,
  coldStartSeconds: 10,
  measuredColdStartSeconds: null,
  offeredShared: extra.offeredShared ?? true,
  offeredDedicated: true,
  published: extra.published ?? true,
  priceInputPerM: 0.1,
  priceOutputPerM: 0.2,
  upstreams,
});

/** Autoscaling fields of a snapshot deployment (issue 10) that these tests do not exercise. */
const scaling = (replicas: number) => ({
  minReplicas: replicas,
  maxReplicas: replicas,
  targetConcurrency: 32,
  desiredReplicas: replicas,
  coldStartSeconds: 10,
  measuredColdStartSeconds: null,
});

/** A snapshot with two tenants, three keys, shared endpoints and dedicated deployments. */
export function makeSnapshot(urls: { sim: string; faulty: string; dead: string }, version = 1): ConfigSnapshot {
  return {
    version,
    tenants: [
      { id: 't-a', slug: 'acme', rpmLimit: null, tpmLimit: null },
      { id: 't-b', slug: 'beta', rpmLimit: null, tpmLimit: null },
    ],
    keys: [
      { id: 'k-a', tenantId: 't-a', hash: hashSecret(SECRET_A), prefix: SECRET_A.slice(0, 12), expiresAt: null, rpmLimit: null, tpmLimit: null },
      {
        id: 'k-b',
        tenantId: 't-b',
        hash: hashSecret(SECRET_B),
        prefix: SECRET_B.slice(0, 12),
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
        rpmLimit: null,
        tpmLimit: null,
      },
      {
        id: 'k-x',
        tenantId: 't-a',
        hash: hashSecret(SECRET_EXPIRED),
        prefix: SECRET_EXPIRED.slice(0, 12),
        expiresAt: '2020-01-01T00:00:00.000Z',
        rpmLimit: null,
        tpmLimit: null,
      },
    ],
    endpoints: [
      endpoint('e-llama', NAME, [upstream('u-1', urls.sim)]),
      endpoint('e-faulty', 'faulty-model', [upstream('u-f', urls.faulty)]),
      endpoint('e-dead', 'dead-model', [upstream('u-d', urls.dead)]),
      endpoint('e-hidden', 'unpublished-model', [upstream('u-h', urls.sim)], { published: false }),
      endpoint('e-ded', 'dedicated-only', [], { offeredShared: false }),
    ],
    deployments: [
      {
        id: 'd-a',
        tenantId: 't-a',
        tenantSlug: 'acme',
        endpointId: 'e-llama',
        endpointName: NAME,
        provider: 'meta',
        state: 'running',
        replicas: [upstream('r-1', urls.sim)],
        ...scaling(1),
      },
      {
        id: 'd-cold',
        tenantId: 't-a',
        tenantSlug: 'acme',
        endpointId: 'e-ded',
        endpointName: 'dedicated-only',
        provider: 'meta',
        state: 'provisioning',
        replicas: [],
        ...scaling(1),
      },
      {
        id: 'd-slash',
        tenantId: 't-a',
        tenantSlug: 'acme',
        endpointId: 'e-llama',
        endpointName: 'meta/llama-slash',
        provider: 'meta',
        state: 'running',
        replicas: [upstream('r-2', urls.sim)],
        ...scaling(1),
      },
    ],
  };
}

export interface StartedApp {
  readonly app: FastifyInstance;
  readonly url: string;
  readonly store: ConfigStore;
  /** The internal metrics listener's `/metrics` URL (a port of its own, apart from `url`). */
  readonly metricsUrl: string;
}

export async function startDataplane(snapshot: ConfigSnapshot | null, usage: UsageSink, extra: Partial<DataplaneAppOptions> = {}): Promise<StartedApp> {
  const store = extra.store ?? createConfigStore(snapshot ?? undefined);
  const app = buildDataplaneApp({ logger: false, metricsListener: { port: 0, host: '127.0.0.1' }, ...extra, store, usage });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}`, store, metricsUrl: app.metricsUrl() ?? '' };
}

/** A sink that keeps records in memory (for tests that look at the node's records directly). */
export function memorySink(): UsageSink & { readonly records: UsageRecord[] } {
  const records: UsageRecord[] = [];
  return { records, record: (r) => void records.push(r) };
}

export interface UsageServer {
  readonly url: string;
  readonly records: UsageRecord[];
  readonly authHeaders: string[];
  /** Answer the next `n` POSTs with 500. */
  failNext(n: number): void;
  /** Refuse the records with these request ids from now on, naming them in the answer as the real ingest does. */
  refuse(requestIds: readonly string[]): void;
  readonly posts: { status: number; count: number }[];
  close(): Promise<void>;
}

/** A real HTTP server standing in for the control plane's usage ingest. */
export async function startUsageServer(): Promise<UsageServer> {
  const records: UsageRecord[] = [];
  const authHeaders: string[] = [];
  const posts: { status: number; count: number }[] = [];
  let failing = 0;
  const refused = new Set<string>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // Only usage batches are taken here: a node with CONTROL_PLANE_URL also posts load reports (every second)
      // and streams its config, which this stand-in does not serve.
      if (req.method !== 'POST' || req.url !== '/internal/v1/usage') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { records: UsageRecord[] };
      authHeaders.push(req.headers.authorization ?? '');
      if (failing > 0) {
        failing = Math.max(0, failing - 1);
        posts.push({ status: 500, count: body.records.length });
        res.writeHead(500).end();
        return;
      }
      // Idempotent on requestId, like the real ingest; refused records are named.
      const rejectedRequestIds: string[] = [];
      for (const r of body.records) {
        if (refused.has(r.requestId)) rejectedRequestIds.push(r.requestId);
        else if (!records.some((x) => x.requestId === r.requestId)) records.push(r);
      }
      posts.push({ status: 200, count: body.records.length });
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify({ accepted: body.records.length - rejectedRequestIds.length, duplicates: 0, rejected: rejectedRequestIds.length, rejectedRequestIds }),
        );
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    records,
    authHeaders,
    posts,
    failNext: (n) => void (failing = n),
    refuse: (ids) => {
      for (const id of ids) refused.add(id);
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** Polls until `check` returns true (generous bound; not a timing assertion). */
export async function waitFor(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(20);
  }
}

export const chatBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say hello.' },
  ],
  max_tokens: 8,
  ...extra,
});

/** POSTs JSON with the given key (or none). */
export function post(url: string, body: unknown, key: string | null = SECRET_A, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key !== null ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Asserts nothing; returns the parsed OpenAI error body (throws if the shape is wrong). */
export async function errorOf(res: Response): Promise<{ message: string; type: string; param: string | null; code: string | null }> {
  const text = await res.text();
  const body = JSON.parse(text) as { error?: { message: string; type: string; param: string | null; code: string | null } };
  if (typeof body.error?.message !== 'string' || typeof body.error.type !== 'string') throw new Error(`not an OpenAI error body: ${text}`);
  return body.error;
}

/** A usage record with placeholder fields, for tests of the reporter and the spool. */
export function fakeRecord(requestId: string): UsageRecord {
  return {
    requestId,
    tenantId: 't',
    keyId: 'k',
    endpointId: 'e',
    deploymentId: null,
    mode: 'shared',
    model: 'm',
    promptTokens: 1,
    completionTokens: 2,
    estimated: false,
    status: 200,
    ttftMs: 1,
    latencyMs: 2,
    startedAt: new Date().toISOString(),
  };
}

/** The payloads of an SSE body's `data: ` lines, in order. */
export const dataLines = (text: string): string[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6));

/**
 * The usual world of a test file: one runtime-sim serving every model of `makeSnapshot`, and a data plane in front
 * of it, started before the file's tests and closed after them. Read `world.dp` / `world.sim` inside tests.
 */
export function useSimDataplane(
  usage: UsageSink = memorySink(),
  extra: Partial<DataplaneAppOptions> = {},
): { readonly sim: StartedSim; readonly dp: StartedApp } {
  const world = {} as { sim: StartedSim; dp: StartedApp };
  beforeAll(async () => {
    world.sim = await startSim();
    world.dp = await startDataplane(makeSnapshot({ sim: world.sim.url, faulty: world.sim.url, dead: await deadUrl() }), usage, extra);
  });
  afterAll(async () => {
    await world.dp?.app.close();
    await world.sim?.sim.close();
  });
  return world;
}

export interface RawAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

export interface SendOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  /** A string or bytes as they are; anything else as JSON. */
  readonly body?: unknown;
  /** Send the body chunked, in two writes (no Content-Length): the fast path leaves such requests to Fastify. */
  readonly chunked?: boolean;
  /** The bearer key (default SECRET_A); null sends no authorization. */
  readonly key?: string | null;
}

/** One request over a real socket (no agent), with full control of framing and headers. */
export function sendRequest(baseUrl: string, path: string, o: SendOptions = {}): Promise<RawAnswer> {
  const body = o.body === undefined ? undefined : typeof o.body === 'string' || Buffer.isBuffer(o.body) ? o.body : JSON.stringify(o.body);
  const headers: Record<string, string> = { 'content-type': 'application/json', ...o.headers };
  const key = o.key === undefined ? SECRET_A : o.key;
  if (key !== null && headers['authorization'] === undefined) headers['authorization'] = `Bearer ${key}`;
  if (body !== undefined && o.chunked !== true) headers['content-length'] = String(Buffer.byteLength(body));
  return new Promise((resolve, reject) => {
    const req = request(`${baseUrl}${path}`, { method: o.method ?? 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined && o.chunked === true) {
      const half = Math.floor(body.length / 2);
      req.write(body.slice(0, half));
      req.end(body.slice(half));
    } else req.end(body);
  });
}
