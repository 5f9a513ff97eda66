// SSRF through tenants' external runtimes (issue 9, finding 2): a tenant-given address that reaches the
// platform's own network is refused at connect time, whatever its spelling or later DNS answers, and the
// node answers a 502 of its own instead of relaying what the internal service said.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configSnapshotSchema, hashSecret, type ConfigSnapshot } from '@infer/shared';
import { createAddressGuard, type ResolvedAddress } from '@infer/shared/address-guard';
import { createUpstreamPools, defaultTimeouts } from '../src/upstream/upstream-pools.ts';
import { memorySink, startDataplane, type StartedApp } from './helpers.ts';

const SECRET = 'infk_test_ssrf_tenant_key_00000000000';
const INTERNAL_MARK = 'INTERNAL-ONLY-7f3a';

interface Origin {
  readonly port: number;
  /** Requests this server received. */
  readonly hits: () => number;
  close(): Promise<void>;
}

/** A real HTTP server on loopback: the platform's internal runtime (answers chat with a marker) or a redirector. */
async function startOrigin(handler: 'internal' | { redirectTo: string }): Promise<Origin> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    hits++;
    req.resume();
    req.on('end', () => {
      if (handler !== 'internal') {
        res.writeHead(302, { location: handler.redirectTo }).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          created: 0,
          model: 'served',
          choices: [{ index: 0, message: { role: 'assistant', content: INTERNAL_MARK }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    hits: () => hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function snapshot(sharedUrl: string, tenantUrls: Record<string, string>): ConfigSnapshot {
  const upstream = (id: string, url: string, tenant: boolean) => ({
    id,
    url,
    kind: 'openai' as const,
    servedModel: 'served',
    apiKey: null,
    ...(tenant ? { addressPolicy: 'public' as const } : {}),
  });
  return configSnapshotSchema.parse({
    version: 1,
    tenants: [{ id: 't-a', slug: 'acme', rpmLimit: null, tpmLimit: null }],
    keys: [{ id: 'k-a', tenantId: 't-a', hash: hashSecret(SECRET), prefix: SECRET.slice(0, 12), expiresAt: null, rpmLimit: null, tpmLimit: null }],
    endpoints: [
      {
        id: 'e-1',
        name: 'shared-model',
        provider: 'p',
        contextLength: 8192,
        concurrency: 1,
        coldStartSeconds: null,
        offeredShared: true,
        offeredDedicated: true,
        published: true,
        priceInputPerM: 1,
        priceOutputPerM: 1,
        upstreams: [upstream('u-1', sharedUrl, false)],
      },
    ],
    deployments: Object.entries(tenantUrls).map(([name, url], i) => ({
      id: `d-${i}`,
      tenantId: 't-a',
      tenantSlug: 'acme',
      endpointId: 'e-1',
      endpointName: name,
      provider: 'p',
      state: 'running',
      replicas: [upstream(`r-${i}`, url, true)],
    })),
  });
}

const chat = (node: StartedApp, path: string): Promise<Response> =>
  fetch(`${node.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: path.includes('/funccall/') ? path.split('/')[4] : 'shared-model',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
    }),
  });
const dedicated = (name: string): string => `/funccall/acme/endpoints/${name}/v1/chat/completions`;

describe('tenant-given runtime addresses on the data plane', () => {
  let internal: Origin;
  let redirector: Origin;
  let strict: StartedApp;
  let allowing: StartedApp;

  beforeAll(async () => {
    internal = await startOrigin('internal');
    redirector = await startOrigin({ redirectTo: `http://127.0.0.1:${internal.port}/v1/chat/completions` });
    const snap = snapshot(`http://127.0.0.1:${internal.port}`, {
      'by-name': `http://localhost:${internal.port}`,
      'by-mapped-v6': `http://[::ffff:127.0.0.1]:${internal.port}`,
      'by-v6-loopback': `http://[::1]:${internal.port}`,
      redirecting: `http://localhost:${redirector.port}`,
    });
    strict = await startDataplane(snap, memorySink());
    allowing = await startDataplane(snap, memorySink(), { allowedPrivateCidrs: ['127.0.0.0/8', '::1/128'] });
  });

  afterAll(async () => {
    await strict?.app.close();
    await allowing?.app.close();
    await internal?.close();
    await redirector?.close();
  });

  it('keeps platform-owned loopback upstreams working', async () => {
    const res = await chat(strict, '/endpoints/v1/chat/completions');
    expect(res.status).toBe(200);
    expect(await res.text()).toContain(INTERNAL_MARK);
  });

  it.each(['by-name', 'by-mapped-v6', 'by-v6-loopback'])('refuses a tenant runtime that reaches loopback (%s) with a 502 of its own', async (name) => {
    const before = internal.hits();
    const res = await chat(strict, dedicated(name));
    const text = await res.text();
    expect(res.status).toBe(502);
    expect(JSON.parse(text)).toMatchObject({ error: { code: 'upstream_error', type: 'api_error', message: expect.stringMatching(/not allowed/) } });
    expect(text).not.toContain(INTERNAL_MARK);
    expect(internal.hits()).toBe(before);
  });

  it('reaches the same address once the operator allow-lists it (the guard is what refused)', async () => {
    const res = await chat(allowing, dedicated('by-name'));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain(INTERNAL_MARK);
  });

  it('never follows a redirect from a tenant runtime', async () => {
    const before = internal.hits();
    const res = await chat(allowing, dedicated('redirecting'));
    const text = await res.text();
    expect(redirector.hits()).toBeGreaterThan(0);
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(text).not.toContain(INTERNAL_MARK);
    expect(internal.hits()).toBe(before);
  });
});

describe('an origin that becomes tenant-given', () => {
  let internal: Origin;
  let node: StartedApp;
  beforeAll(async () => {
    internal = await startOrigin('internal');
    node = await startDataplane(snapshot(`http://127.0.0.1:${internal.port}`, {}), memorySink());
  });
  afterAll(async () => {
    await node?.app.close();
    await internal?.close();
  });

  it('gets a guarded pool: sockets the platform opened to it are not reused for the tenant', async () => {
    const shared = await chat(node, '/endpoints/v1/chat/completions');
    expect(await shared.text()).toContain(INTERNAL_MARK); // a keep-alive socket to the internal runtime is now open
    const next = snapshot(`http://127.0.0.1:${internal.port}`, { 'same-origin': `http://127.0.0.1:${internal.port}` });
    node.store.replace({ ...next, version: 2 });
    const before = internal.hits();
    const res = await chat(node, dedicated('same-origin'));
    const text = await res.text();
    expect(res.status).toBe(502);
    expect(text).not.toContain(INTERNAL_MARK);
    expect(internal.hits()).toBe(before);
  });
});

describe('upstream pools pin tenant origins to checked addresses', () => {
  let internal: Origin;
  beforeAll(async () => {
    internal = await startOrigin('internal');
  });
  afterAll(async () => internal?.close());

  const scripted = (answers: string[][]) => {
    let n = 0;
    return async (): Promise<readonly ResolvedAddress[]> => (answers[Math.min(n++, answers.length - 1)] ?? []).map((address) => ({ address, family: 4 }));
  };

  it('refuses a name that rebinds to loopback after it was checked', async () => {
    const guard = createAddressGuard({ resolve: scripted([['93.184.216.34'], ['127.0.0.1']]) });
    await expect(guard.check('rebind.test')).resolves.toHaveLength(1); // what registration saw
    const origin = `http://rebind.test:${internal.port}`;
    const pools = createUpstreamPools({ timeouts: defaultTimeouts, addressGuard: { guard, isTenantOrigin: (o) => o === origin } });
    try {
      await expect(pools.get(origin).pool.request({ method: 'GET', path: '/health' })).rejects.toMatchObject({ code: 'ADDRESS_REFUSED' });
      expect(internal.hits()).toBe(0);
    } finally {
      await pools.close();
    }
  });

  it('dials exactly the address the guard resolved (a name unknown to the system resolver)', async () => {
    const guard = createAddressGuard({ resolve: scripted([['127.0.0.1']]), allowedCidrs: ['127.0.0.0/8'] });
    const origin = `http://only-in-the-guard.test:${internal.port}`;
    const pools = createUpstreamPools({ timeouts: defaultTimeouts, addressGuard: { guard, isTenantOrigin: (o) => o === origin } });
    try {
      const res = await pools.get(origin).pool.request({ method: 'GET', path: '/health' });
      await res.body.dump();
      expect(res.statusCode).toBe(200);
      expect(internal.hits()).toBe(1);
    } finally {
      await pools.close();
    }
  });
});
