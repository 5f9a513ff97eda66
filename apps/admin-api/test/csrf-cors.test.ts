import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { appOn, consoleAppOn, cookieOf, gql, type RunningApp } from './app-on.ts';
import { buildWorld, PASSWORD, trpc, type World } from './trpc-fixtures.ts';

const CONSOLE = 'https://console.example.com';

/**
 * Finding 1: a page on another port or a sibling subdomain, with the victim's session cookie
 * (SameSite=Lax sends it: both are same-site), tried to read a tenant's data and mint an API key
 * through GraphQL and tRPC, spoofing X-Forwarded-Host so the Origin check matched.
 */
describe.each(testBackends())('cross-origin attacks on the control plane (%s)', (kind) => {
  let database: TestDatabase;
  let w: World;
  let t: RunningApp;
  let victim: string;
  let attackers: [string, string][];

  beforeAll(async () => {
    database = await createTestDb(kind);
    w = await buildWorld(database.db);
    t = await appOn(database, { consoleOrigins: [CONSOLE] });
    victim = w.parties.ownerA.cookie!;
    const port = Number(new URL(t.baseUrl).port);
    attackers = [
      ['another port', `http://127.0.0.1:${port + 1}`],
      ['a sibling subdomain', 'https://status.example.com'],
      ['an opaque origin', 'null'],
    ];
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await database?.close();
  });

  const keyCount = async () => (await database.db.selectFrom('apiKeys').select('id').where('tenantId', '=', w.tenantA.id).execute()).length;
  const readTenant = `query { tenant(id: "${'$'}ID") { id name } }`;
  const mintKey = `mutation { createApiKey(tenantId: "${'$'}ID", name: "stolen") { secret } }`;
  const withTenant = (q: string) => q.replace('$ID', w.tenantA.id);

  it('GraphQL: no tenant data, no API key, no credentialed CORS for a foreign page', async () => {
    const before = await keyCount();
    for (const [what, origin] of attackers) {
      // The browser's preflight (the spoofed header makes the request non-simple) gets no CORS grant.
      const preflight = await fetch(`${t.baseUrl}/graphql`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, x-forwarded-host' },
      });
      expect(preflight.headers.get('access-control-allow-credentials'), what).toBeNull();
      expect(preflight.headers.get('access-control-allow-origin'), what).not.toBe(origin);

      const spoof = { cookie: victim, origin, 'x-forwarded-host': new URL(origin === 'null' ? t.baseUrl : origin).host };
      const read = await gql(t.baseUrl, withTenant(readTenant), spoof);
      expect(read.body.data?.tenant, what).toBeUndefined();
      expect(read.body.errors?.[0]?.extensions?.code, what).toBe('forbidden');
      expect(read.headers.get('access-control-allow-credentials'), what).toBeNull();
      expect(JSON.stringify(read.body)).not.toContain('Tenant A');

      const mint = await gql(t.baseUrl, withTenant(mintKey), spoof);
      expect(mint.body.data?.createApiKey, what).toBeUndefined();
      expect(mint.body.errors?.[0]?.extensions?.code, what).toBe('forbidden');
      expect(mint.headers.get('access-control-allow-credentials'), what).toBeNull();
    }
    expect(await keyCount()).toBe(before);
  });

  it('a cross-site link or form GET (no Origin, no Referer: only Sec-Fetch-Site) gets no tenant data with the Lax cookie', async () => {
    const url = `${t.baseUrl}/graphql?query=${encodeURIComponent(withTenant(readTenant))}`;
    const get = async (headers: Record<string, string>) => {
      const res = await fetch(url, { headers: { cookie: victim, accept: 'application/json', ...headers } });
      return { status: res.status, text: await res.text() };
    };
    for (const site of ['cross-site', 'same-site']) {
      const r = await get({ 'sec-fetch-site': site });
      expect(r.status, site).toBe(403);
      expect(r.text, site).not.toContain('Tenant A');
      expect(r.text, site).toContain('forbidden');
    }
    // The console's own page, a typed URL, or a script without the header: answered as before.
    for (const headers of [{ 'sec-fetch-site': 'same-origin' }, { 'sec-fetch-site': 'none' }, {}] as Record<string, string>[]) {
      const r = await get(headers);
      expect(r.status, JSON.stringify(headers)).toBe(200);
      expect(r.text).toContain('Tenant A');
    }
  });

  it('tRPC: the same page can neither read nor create keys', async () => {
    const before = await keyCount();
    for (const [what, origin] of attackers) {
      const spoof = { cookie: victim, origin, 'x-forwarded-host': new URL(origin === 'null' ? t.baseUrl : origin).host };
      const list = await trpc(t.baseUrl, 'keys.list', { input: { tenantId: w.tenantA.id }, headers: spoof });
      expect(list.status, what).toBe(403);
      expect(list.body.result).toBeUndefined();
      const create = await trpc(t.baseUrl, 'keys.create', { mutation: true, input: { tenantId: w.tenantA.id, name: 'stolen' }, headers: spoof });
      expect(create.status, what).toBe(403);
    }
    // A same-origin Referer does not vouch for a foreign Origin.
    const mixed = await trpc(t.baseUrl, 'keys.create', {
      mutation: true,
      input: { tenantId: w.tenantA.id, name: 'stolen' },
      headers: { cookie: victim, origin: 'null', referer: `${t.baseUrl}/keys` },
    });
    expect(mixed.status).toBe(403);
    expect(await keyCount()).toBe(before);
  });

  it('the configured console origin gets credentialed CORS and works; so does this server itself', async () => {
    const preflight = await fetch(`${t.baseUrl}/graphql`, {
      method: 'OPTIONS',
      headers: { origin: CONSOLE, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(preflight.headers.get('access-control-allow-origin')).toBe(CONSOLE);
    expect(preflight.headers.get('access-control-allow-credentials')).toBe('true');
    const read = await gql(t.baseUrl, withTenant(readTenant), { cookie: victim, origin: CONSOLE });
    expect(read.body.data?.tenant?.id).toBe(w.tenantA.id);
    expect(read.headers.get('access-control-allow-origin')).toBe(CONSOLE);

    const own = await gql(t.baseUrl, withTenant(mintKey), { cookie: victim, origin: t.baseUrl });
    expect(own.body.data?.createApiKey?.secret).toMatch(/^inf/);
    expect(own.headers.get('access-control-allow-credentials')).toBeNull();
    // Admin tokens are not ambient credentials: any origin may use one.
    const bearer = await gql(t.baseUrl, withTenant(readTenant), { authorization: w.parties.tokenA.authorization!, origin: 'https://status.example.com' });
    expect(bearer.body.data?.tenant?.id).toBe(w.tenantA.id);
  });

  it('honours X-Forwarded-Host/Proto only behind a configured trusted proxy', async () => {
    const forwarded = { origin: 'https://console.internal.example', 'x-forwarded-host': 'console.internal.example', 'x-forwarded-proto': 'https' };
    const login = (base: string) =>
      trpc(base, 'auth.login', { mutation: true, input: { email: w.parties.ownerB.email, password: PASSWORD }, headers: forwarded });
    const direct = await login(t.baseUrl);
    expect(direct.status).toBe(403);
    const proxied = await appOn(database, { trustProxy: ['127.0.0.1'] });
    try {
      const res = await login(proxied.baseUrl);
      expect(res.status).toBe(200);
      expect(res.setCookie.find((s) => s.startsWith('session='))).toMatch(/; Secure/);
      const cookie = cookieOf(res.setCookie);
      const key = await trpc(proxied.baseUrl, 'keys.create', {
        mutation: true,
        input: { tenantId: w.tenantB.id, name: 'via proxy' },
        headers: { ...forwarded, cookie },
      });
      expect(key.status).toBe(200);
    } finally {
      await proxied.close();
    }
  });

  it('answers a tRPC input error with one readable message naming the field', async () => {
    const res = await trpc(t.baseUrl, 'keys.create', {
      mutation: true,
      input: { tenantId: w.tenantA.id, name: '' },
      headers: { cookie: victim, origin: t.baseUrl },
    });
    expect(res.status).toBe(400);
    expect(res.body.error?.data.param).toBe('name');
    expect(res.body.error?.message).toMatch(/^name: /);
    expect(res.body.error?.message).not.toMatch(/^\[|"code"/);
  });
});

describe('console security headers', () => {
  let t: RunningApp;
  const style = 'body { font-family: sans-serif; }';

  beforeAll(async () => {
    // The shape of a Vite build (module script and stylesheet by URL) plus one inline style, as the fallback page has.
    t = await consoleAppOn({
      'index.html': `<!doctype html><html><head><style>${style}</style><link rel="stylesheet" href="/assets/a.css"><script type="module" crossorigin src="/assets/a.js"></script></head><body><div id="root"></div></body></html>`,
    });
  }, 60_000);
  afterAll(async () => t?.close());

  it('sends CSP, frame denial, nosniff and a referrer policy with the console and its SPA routes', async () => {
    for (const path of ['/', '/tenants/abc/keys']) {
      const res = await fetch(`${t.baseUrl}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('referrer-policy')).toBe('strict-origin-when-cross-origin');
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("default-src 'self'");
      expect(csp).toMatch(/script-src 'self'(;|$)/);
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).toContain(`style-src 'self' 'sha256-${createHash('sha256').update(style).digest('base64')}'`);
      // The playground calls the data plane from the browser.
      expect(csp).toContain("connect-src 'self' http://127.0.0.1:9");
    }
    const api = await fetch(`${t.baseUrl}/healthz`);
    expect(api.headers.get('x-content-type-options')).toBe('nosniff');
  });
});
