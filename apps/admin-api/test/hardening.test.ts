import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackends } from '@infer/db/testing';
import { hashSecret } from '@infer/shared';
import { SESSION_TTL_MS } from '../src/modules/auth/sessions.ts';
import { appOn, consoleAppOn, type RunningApp } from './app-on.ts';
import { NODE_TOKEN, startTestApp, type TestApp } from './helpers.ts';
import { buildWorld, type World } from './trpc-fixtures.ts';

interface Raw {
  status: number;
  contentType: string;
  text: string;
  json: any;
}

async function raw(url: string, init: RequestInit = {}): Promise<Raw> {
  const res = await fetch(url, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text, json };
}

/** One request over a plain socket: the path goes out as written (fetch would normalise it), headers of any size. */
function rawHttp(
  baseUrl: string,
  path: string,
  init: { method?: string; headers?: Record<string, string> } = {},
): Promise<Raw & { headers: Record<string, unknown> }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, method: init.method ?? 'GET', headers: init.headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'] ?? '', text, json, headers: res.headers });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The admin API's own error shape: `{"error": {"message", "type", "param", "code"}}`, nothing of Fastify's. */
function expectApiError(r: Raw, status: number, code: string): void {
  expectClient4xx(r, status);
  expect(Object.keys(r.json.error ?? {}).sort(), r.text).toEqual(['code', 'message', 'param', 'type']);
  expect(r.json.error.code, r.text).toBe(code);
  expect(r.text).not.toMatch(/FST_ERR|statusCode/);
}

/** A clear 4xx: JSON body, no stack trace, no HTML. */
function expectClient4xx(r: Raw, status?: number): void {
  if (status !== undefined) expect(r.status, r.text).toBe(status);
  expect(r.status, r.text).toBeGreaterThanOrEqual(400);
  expect(r.status, r.text).toBeLessThan(500);
  expect(r.contentType).toMatch(/json/);
  expect(r.json, r.text).toBeDefined();
  expect(r.text).not.toMatch(/<html|\n\s+at |node_modules|\.ts:\d+/i);
}

describe.each(testBackends())('hardening (%s)', (kind) => {
  let t: TestApp;
  let w: World;
  const nodeHeaders = { authorization: `Bearer ${NODE_TOKEN}`, 'content-type': 'application/json' };

  beforeAll(async () => {
    t = await startTestApp(kind);
    w = await buildWorld(t.database.db);
  }, 60_000);
  afterAll(async () => t?.close());

  const gql = (body: unknown, headers: Record<string, string> = {}) =>
    raw(`${t.baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const usage = (body: unknown) =>
    raw(`${t.baseUrl}/internal/v1/usage`, { method: 'POST', headers: nodeHeaders, body: typeof body === 'string' ? body : JSON.stringify(body) });

  const record = (over: Record<string, unknown> = {}) => ({
    requestId: `req-${randomUUID()}`,
    tenantId: w.tenantA.id,
    keyId: randomUUID(),
    endpointId: randomUUID(),
    deploymentId: null,
    mode: 'shared',
    model: 'm',
    promptTokens: 1,
    completionTokens: 1,
    estimated: false,
    status: 200,
    ttftMs: 1,
    latencyMs: 2,
    startedAt: new Date().toISOString(),
    ...over,
  });

  describe('bad input to /internal/v1/usage is a 4xx', () => {
    const cases: [string, () => unknown][] = [
      ['bad JSON', () => '{"records": ['],
      ['not an object', () => '[]'],
      ['tokens past int4', () => ({ records: [record({ promptTokens: 3_000_000_000 })] })],
      ['status past int4', () => ({ records: [record({ status: 99_999_999_999 })] })],
      ['NUL in request id', () => ({ records: [record({ requestId: 'a\u0000b' })] })],
      ['NUL in model', () => ({ records: [record({ model: 'a\u0000b' })] })],
      ['date out of range', () => ({ records: [record({ startedAt: '-271821-04-20T00:00:00.000Z' })] })],
      ['wrong types', () => ({ records: [record({ promptTokens: '1' })] })],
    ];
    for (const [name, body] of cases) {
      it(name, async () => {
        const r = await usage(body());
        if (r.status === 200) {
          expect(r.json.accepted, r.text).toBe(0);
        } else expectClient4xx(r);
      });
    }
  });

  describe('bad input to /trpc is a 4xx', () => {
    const post = (path: string, body: string, headers: Record<string, string> = {}) =>
      raw(`${t.baseUrl}/trpc/${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    it('bad JSON', async () => expectClient4xx(await post('auth.login', '{"email":')));
    it('wrong types', async () => expectClient4xx(await post('auth.login', JSON.stringify({ email: 5, password: [] }))));
    it('NUL in login email', async () => expectClient4xx(await post('auth.login', JSON.stringify({ email: 'a\u0000@b.c', password: 'xxxxxxxxxxxx' }))));
    it('NUL in catalog.byName', async () =>
      expectClient4xx(await raw(`${t.baseUrl}/trpc/catalog.byName?input=${encodeURIComponent(JSON.stringify({ name: 'a\u0000' }))}`)));
    it('NUL in catalog.list filter', async () =>
      expectClient4xx(await raw(`${t.baseUrl}/trpc/catalog.list?input=${encodeURIComponent(JSON.stringify({ search: 'a\u0000' }))}`)));
    it('huge string', async () => expectClient4xx(await post('auth.login', JSON.stringify({ email: 'x'.repeat(2_000_000), password: 'y' }))));
    it('wrong content type', async () => expectClient4xx(await post('auth.login', 'email=a', { 'content-type': 'text/plain' })));
    it('GET a mutation', async () => expectClient4xx(await raw(`${t.baseUrl}/trpc/auth.login`)));
    it('POST a query', async () => expectClient4xx(await post('catalog.list', '{}')));
    it('unknown procedure', async () => expectClient4xx(await raw(`${t.baseUrl}/trpc/nope.nothing`)));
    it('junk batch', async () => {
      const r = await post('auth.login,auth.login?batch=1', '{"0": 5, "1": "x"}');
      expectClient4xx(r, 400);
      expect(r.json.map((e: { error: { data: { code: string } } }) => e.error.data.code)).toEqual(['BAD_REQUEST', 'BAD_REQUEST']);
    });
    it('batch with non-object', async () => expectClient4xx(await post('auth.login?batch=1', '"junk"')));
    it('batch query with junk input', async () => expectClient4xx(await raw(`${t.baseUrl}/trpc/catalog.list,catalog.byName?batch=1&input=junk`)));
    it('PUT', async () =>
      expectClient4xx(await raw(`${t.baseUrl}/trpc/auth.login`, { method: 'PUT', body: '{}', headers: { 'content-type': 'application/json' } })));
    it('bad uuid', async () =>
      expectClient4xx(
        await raw(`${t.baseUrl}/trpc/keys.list?input=${encodeURIComponent(JSON.stringify({ tenantId: 'x' }))}`, {
          headers: { authorization: w.parties.platformToken.authorization! },
        }),
      ));
    it('NUL in members.add email', async () => {
      const r = await post('tenants.members.add', JSON.stringify({ tenantId: w.tenantA.id, email: 'a\u0000@b.c' }), {
        authorization: w.parties.platformToken.authorization!,
      });
      expectClient4xx(r);
    });
    it('NUL in keys.create name', async () => {
      const r = await post('keys.create', JSON.stringify({ tenantId: w.tenantA.id, name: 'a\u0000' }), {
        authorization: w.parties.platformToken.authorization!,
      });
      expectClient4xx(r);
    });
    it('NUL in deployments.create entry', async () => {
      const r = await post('deployments.create', JSON.stringify({ tenantId: w.tenantA.id, entryName: 'a\u0000' }), {
        authorization: w.parties.platformToken.authorization!,
      });
      expectClient4xx(r);
    });
    it('NUL in audit action', async () => {
      const r = await raw(`${t.baseUrl}/trpc/audit.list?input=${encodeURIComponent(JSON.stringify({ action: 'a\u0000' }))}`, {
        headers: { authorization: w.parties.platformToken.authorization! },
      });
      expectClient4xx(r);
    });
    it('huge audit before', async () => {
      const r = await raw(`${t.baseUrl}/trpc/audit.list?input=${encodeURIComponent(JSON.stringify({ before: 2 ** 60 }))}`, {
        headers: { authorization: w.parties.platformToken.authorization! },
      });
      expect(r.status, r.text).toBeLessThan(500);
    });
    it('huge usage range dates', async () => {
      const r = await raw(
        `${t.baseUrl}/trpc/usage.summary?input=${encodeURIComponent(JSON.stringify({ tenantId: w.tenantA.id, from: '0000-01-01', to: '0000-06-01' }))}`,
        { headers: { authorization: w.parties.platformToken.authorization! } },
      );
      expect(r.status, r.text).toBeLessThan(500);
    });
  });

  describe('odd HTTP on /graphql is a JSON 4xx', () => {
    it('GET without a query is a 400', async () => expectClient4xx(await raw(`${t.baseUrl}/graphql`), 400));
    it('an Accept it cannot serve is a 406 with a JSON body', async () =>
      expectClient4xx(await gql({ query: '{ viewer { kind } }' }, { accept: 'text/html' }), 406));
    it('DELETE is a 405', async () => expectClient4xx(await raw(`${t.baseUrl}/graphql`, { method: 'DELETE' }), 405));
    it('refusals before any operation runs are GraphQL-shaped ({"errors": [...]}), which GraphQL clients read', async () => {
      const cases: [string, Raw, number, string][] = [
        ['bad JSON', await gql('{"query":'), 400, 'invalid_json'],
        ['text/plain', await gql('{ viewer { kind } }', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type'],
        ['DELETE', await raw(`${t.baseUrl}/graphql`, { method: 'DELETE' }), 405, 'method_not_allowed'],
        ['Accept text/html', await gql({ query: '{ viewer { kind } }' }, { accept: 'text/html' }), 406, 'invalid_request'],
      ];
      for (const [what, r, status, code] of cases) {
        expectClient4xx(r, status);
        const body = r.json as { errors?: { message: string; extensions: { code: string } }[]; error?: unknown };
        expect(body.error, what).toBeUndefined();
        expect(body.errors?.[0]?.extensions.code, `${what}: ${r.text}`).toBe(code);
        expect(body.errors?.[0]?.message.length, what).toBeGreaterThan(0);
      }
    });
    it('every refusal has extensions.code and extensions.param, as the README says (GraphQL Yoga’s own ones included)', async () => {
      const cases: [string, Raw][] = [
        ['bad JSON', await gql('{"query":')],
        ['text/plain', await gql('{ viewer { kind } }', { 'content-type': 'text/plain' })],
        ['DELETE', await raw(`${t.baseUrl}/graphql`, { method: 'DELETE' })],
        ['Accept text/html', await gql({ query: '{ viewer { kind } }' }, { accept: 'text/html' })],
        ['GET without a query', await raw(`${t.baseUrl}/graphql`)],
        ['mutation over GET', await raw(`${t.baseUrl}/graphql?query=${encodeURIComponent('mutation { logout }')}`)],
        ['no query', await gql('{}')],
        ['syntax error', await gql({ query: '{ viewer { ' })],
        ['unknown field', await gql({ query: '{ nope }' })],
        ['bad variable', await gql({ query: 'query($id: ID) { tenant(id: $id) { id } }', variables: { id: { a: 1 } } })],
      ];
      for (const [what, r] of cases) {
        const ext = (r.json as { errors?: { extensions?: Record<string, unknown> }[] }).errors?.[0]?.extensions;
        expect(typeof ext?.['code'], `${what}: ${r.text}`).toBe('string');
        expect(ext !== undefined && 'param' in ext, `${what}: ${r.text}`).toBe(true);
      }
    });
    it('a syntax error is a 400 whatever the Accept', async () => {
      const r = await gql({ query: '{ viewer { ' }, { accept: 'application/json' });
      expectClient4xx(r, 400);
      expect(r.json.errors[0].message).toMatch(/Syntax Error/);
    });
    it('a bad variable names the variable (not "Unexpected error.")', async () => {
      const r = await gql({ query: 'query($id: ID) { tenant(id: $id) { id } }', variables: { id: { a: 1 } } });
      expectClient4xx(r, 400);
      expect(r.json.errors[0].message).toMatch(/\$id/);
    });
    it("a JSON body without keys, or not an object, gets GraphQL's own answer and no parser internals", async () => {
      const answers: [string, string][] = [
        ['{}', 'Must provide query string.'],
        ['{"variables":{}}', 'Must provide query string.'],
        ['null', 'POST body is expected to be object but received null'],
        ['"x"', 'POST body is expected to be object but received string'],
        ['5', 'POST body is expected to be object but received number'],
        ['[]', 'Batching is not supported.'],
      ];
      for (const [body, message] of answers) {
        const r = await gql(body, { accept: 'application/json' });
        expectClient4xx(r, 400);
        expect(
          r.json.errors.map((e: { message: string }) => e.message),
          body,
        ).toEqual([message]);
        expect(r.text, body).not.toMatch(/originalError|SyntaxError/);
      }
    });
    it('executed results keep 200 (errors beside data)', async () => {
      const r = await gql({ query: 'query($s: String!) { endpoint(name: $s) { name } }', variables: { s: 'a\u0000' } });
      expect(r.status).toBe(200);
      expect(r.json.data).toEqual({ endpoint: null });
      expect(r.json.errors[0].extensions.code).toBe('invalid');
    });
  });

  describe('what the router or the HTTP parser refuses is a JSON error in the API shape', () => {
    it('a malformed percent-encoding in the path is a 400, not Fastify’s FST_ERR_BAD_URL', async () => {
      for (const path of ['/trpc/%E0%A4%A', '/trpc/auth.me%', '/%', '/internal/v1/%zz', '/graphql%']) {
        const r = await rawHttp(t.baseUrl, path);
        expectApiError(r, 400, 'invalid_request');
        expect(r.json.error.message, path).toMatch(/percent-encoding/);
      }
    });
    it('a malformed percent-encoding in the query string of /graphql is a GraphQL-shaped 400', async () => {
      for (const path of ['/graphql?x=%', '/graphql?query=%E0%A4%A']) {
        const r = await rawHttp(t.baseUrl, path);
        expectClient4xx(r, 400);
        expect(typeof r.json.errors?.[0]?.extensions?.code, `${path}: ${r.text}`).toBe('string');
      }
    });
    it('headers past the size limit are a 431 in the API shape', async () => {
      const r = await rawHttp(t.baseUrl, '/trpc/auth.me', { headers: { 'x-padding': 'a'.repeat(40_000) } });
      expectApiError(r, 431, 'request_too_large');
      // The connection is closed after the answer; the server keeps serving others.
      expect((await raw(`${t.baseUrl}/healthz`)).status).toBe(200);
    });
  });

  describe('tRPC answers the methods it does not serve with a 405', () => {
    for (const method of ['OPTIONS', 'DELETE', 'PUT', 'PATCH']) {
      it(method, async () => {
        const r = await rawHttp(t.baseUrl, '/trpc/auth.me', {
          method,
          headers: { origin: 'https://console.example', 'access-control-request-method': 'POST' },
        });
        expectApiError(r, 405, 'method_not_allowed');
        expect(r.headers['allow']).toBe('GET, HEAD, POST');
        expect(r.headers['access-control-allow-origin']).toBeUndefined();
      });
    }
    it('GET and POST still reach tRPC', async () => {
      expect((await raw(`${t.baseUrl}/trpc/auth.me`)).status).toBe(200);
      expect((await raw(`${t.baseUrl}/trpc/auth.logout`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(200);
    });
  });

  describe('names with NUL, control or bidi-formatting characters are a 400 naming the field, on both transports', () => {
    const BAD = ['a\u0000b', 'a\u202Eb', 'a\u202Ab', 'a\u2066b', 'a\u2069b', 'a\u0007b', 'a\nb', 'a\u007Fb', 'a\u009Bb'];
    const admin = () => ({ cookie: w.parties.admin.cookie!, origin: t.baseUrl, 'content-type': 'application/json' });
    const post = (path: string, input: unknown) => raw(`${t.baseUrl}/trpc/${path}`, { method: 'POST', headers: admin(), body: JSON.stringify(input) });
    const count = async () => {
      const n = async (table: 'tenants' | 'apiKeys' | 'adminTokens' | 'nodeCredentials' | 'catalogEntries' | 'deployments') =>
        Number(
          (
            await t.database.db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll<string>().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      return Promise.all((['tenants', 'apiKeys', 'adminTokens', 'nodeCredentials', 'catalogEntries', 'deployments'] as const).map(n));
    };
    const trpcCases: [string, (name: string) => unknown, string][] = [
      ['tenants.create', (name) => ({ slug: `bad-${randomUUID().slice(0, 8)}`, name }), 'name'],
      ['keys.create', (name) => ({ tenantId: w.tenantA.id, name }), 'name'],
      ['adminTokens.create', (name) => ({ tenantId: null, name }), 'name'],
      ['nodeCredentials.create', (name) => ({ name }), 'name'],
      ['catalog.create', (name) => ({ name }), 'name'],
      ['deployments.create', (entryName) => ({ tenantId: w.tenantA.id, entryName }), 'entryName'],
    ];
    for (const [path, input, param] of trpcCases) {
      it(`tRPC ${path}`, async () => {
        const before = await count();
        for (const name of BAD) {
          const r = await post(path, input(name));
          expectClient4xx(r, 400);
          expect(r.json.error.data.param, `${JSON.stringify(name)}: ${r.text}`).toBe(param);
          expect(r.json.error.message, r.text).toMatch(
            new RegExp(`^${param} must not contain (a NUL|a control|a bidirectional formatting) character \\(U\\+[0-9A-F]{4}\\)$`),
          );
        }
        expect(await count()).toEqual(before);
      });
    }
    it('tRPC catalog.byName', async () => {
      for (const name of BAD) {
        const r = await raw(`${t.baseUrl}/trpc/catalog.byName?input=${encodeURIComponent(JSON.stringify({ name }))}`);
        expectClient4xx(r, 400);
        expect(r.json.error.data.param, r.text).toBe('name');
      }
    });
    const gqlCases: [string, string, Record<string, unknown>, string][] = [
      ['createTenant', 'mutation($n: String!, $s: String!) { createTenant(slug: $s, name: $n) { id } }', { s: 'bad-gql' }, 'name'],
      ['createApiKey', 'mutation($n: String!, $t: ID!) { createApiKey(tenantId: $t, name: $n) { secret } }', {}, 'name'],
      ['createNodeCredential', 'mutation($n: String!) { createNodeCredential(name: $n) { secret } }', {}, 'name'],
      ['createCatalogEntry', 'mutation($n: String!) { createCatalogEntry(input: { name: $n }) { name } }', {}, 'name'],
      ['deployEndpoint', 'mutation($n: String!, $t: ID!) { deployEndpoint(tenantId: $t, endpointName: $n) { id } }', {}, 'endpointName'],
      ['endpoint', 'query($n: String!) { endpoint(name: $n) { name } }', {}, 'name'],
    ];
    for (const [what, query, vars, param] of gqlCases) {
      it(`GraphQL ${what}`, async () => {
        const before = await count();
        for (const name of BAD) {
          const r = await gql({ query, variables: { ...vars, t: w.tenantA.id, n: name } }, admin());
          const err = r.json.errors?.[0];
          expect(err?.extensions, `${JSON.stringify(name)}: ${r.text}`).toMatchObject({ code: 'invalid', param });
          expect(err.message).toMatch(/must not contain (a NUL|a control|a bidirectional formatting) character/);
        }
        expect(await count()).toEqual(before);
      });
    }
    it('names in any script, with inner spaces and surrounding whitespace, are still accepted', async () => {
      const r = await post('keys.create', { tenantId: w.tenantA.id, name: '\tКлюч 名前 مفتاح\n' });
      expect(r.status, r.text).toBe(200);
      expect(r.json.result.data.key.name).toBe('Ключ 名前 مفتاح');
    });
  });

  describe('sessions', () => {
    it('a renewed session cookie keeps Secure behind a TLS proxy (GraphQL as tRPC)', async () => {
      const token = w.parties.memberA.cookie!.slice('session='.length);
      const soon = new Date(Date.now() + SESSION_TTL_MS / 4);
      await t.database.db.updateTable('sessions').set({ expiresAt: soon }).where('id', '=', hashSecret(token)).execute();
      // X-Forwarded-Proto counts only from a configured trusted proxy (here: this test, on loopback).
      const proxied = await appOn(t.database, { trustProxy: ['127.0.0.1'] });
      const res = await fetch(`${proxied.baseUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', cookie: w.parties.memberA.cookie!, 'x-forwarded-proto': 'https' },
        body: JSON.stringify({ query: '{ viewer { kind } }' }),
      });
      expect(res.status).toBe(200);
      const cookie = res.headers.getSetCookie().find((c) => c.startsWith('session='));
      await proxied.close();
      expect(cookie).toBeDefined();
      expect(cookie).toMatch(/; Secure/);
    });

    it('cookie mutations without a matching Origin are refused on both transports; logout ends the session', async () => {
      const cookie = w.parties.ownerA.cookie!;
      const t1 = await raw(`${t.baseUrl}/trpc/keys.create`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', cookie },
        body: JSON.stringify({ tenantId: w.tenantA.id, name: 'csrf' }),
      });
      expectClient4xx(t1, 403);
      const g1 = await gql(
        { query: 'mutation($t: ID!) { createApiKey(tenantId: $t, name: "csrf") { secret } }', variables: { t: w.tenantA.id } },
        { cookie, origin: 'https://evil.example' },
      );
      expect(g1.json.errors[0].extensions.code).toBe('forbidden');
      expect(JSON.stringify(g1.json)).not.toMatch(/inf_/);
      const keys = await t.database.db.selectFrom('apiKeys').select('name').where('tenantId', '=', w.tenantA.id).where('name', '=', 'csrf').execute();
      expect(keys).toEqual([]);

      const out = await raw(`${t.baseUrl}/trpc/auth.logout`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', cookie, origin: t.baseUrl },
        body: '{}',
      });
      expect(out.status).toBe(200);
      const after = await raw(`${t.baseUrl}/trpc/auth.me`, { headers: { cookie } });
      expect(after.json.result.data).toBeNull();
      const g2 = await gql({ query: '{ viewer { kind } }' }, { cookie });
      expect(g2.json.data.viewer).toBeNull();
    });
  });

  describe('bad input to /graphql is a 4xx', () => {
    it('syntax error', async () => expectClient4xx(await gql({ query: '{ viewer { ' })));
    it('bad JSON', async () => expectClient4xx(await gql('{"query":')));
    it('no query', async () => expectClient4xx(await gql({})));
    it('query not a string', async () => expectClient4xx(await gql({ query: 5 })));
    it('variables not an object', async () => expectClient4xx(await gql({ query: '{ viewer { kind } }', variables: 'x' })));
    it('wrong variable type', async () => expectClient4xx(await gql({ query: 'query($id: ID) { tenant(id: $id) { id } }', variables: { id: { a: 1 } } })));
    it('unknown field', async () => expectClient4xx(await gql({ query: '{ nope }' })));
    it('bad DateTime variable', async () => {
      const r = await gql(
        { query: 'query($id: ID, $f: DateTime) { tenant(id: $id) { usage(from: $f) { from } } }', variables: { id: w.tenantA.id, f: 'yesterday' } },
        { authorization: w.parties.platformToken.authorization! },
      );
      expectClient4xx(r);
    });
    it('NUL in slug', async () => {
      const r = await gql(
        { query: 'query($s: String) { tenant(slug: $s) { id } }', variables: { s: 'a\u0000' } },
        { authorization: w.parties.platformToken.authorization! },
      );
      expect(r.status, r.text).toBeLessThan(500);
      expect(r.json.errors?.[0]?.extensions?.code, r.text).not.toBe('internal_error');
    });
    it('NUL in endpoint name', async () => {
      const r = await gql({ query: 'query($s: String!) { endpoint(name: $s) { name } }', variables: { s: 'a\u0000' } });
      expect(r.json.errors?.[0]?.extensions?.code, r.text).not.toBe('internal_error');
    });
    it('NUL in createTenant name', async () => {
      const r = await gql(
        { query: 'mutation { createTenant(slug: "nul-name", name: "a\\u0000") { id } }' },
        { authorization: w.parties.platformToken.authorization! },
      );
      expect(r.json.errors?.[0]?.extensions?.code, r.text).not.toBe('internal_error');
    });
    it('createTenant with negative limit', async () => {
      const r = await gql(
        { query: 'mutation { createTenant(slug: "neg-limit", name: "x", rpmLimit: -5) { id } }' },
        { authorization: w.parties.platformToken.authorization! },
      );
      expect(r.json.errors?.[0]?.extensions?.code, r.text).toBe('invalid');
    });
    it('GET mutation', async () => {
      const r = await raw(`${t.baseUrl}/graphql?query=${encodeURIComponent('mutation { createTenant(slug: "x", name: "y") { id } }')}`, {
        headers: { authorization: w.parties.platformToken.authorization! },
      });
      expectClient4xx(r);
    });
    it('wrong content type', async () => expectClient4xx(await gql('query=x', { 'content-type': 'text/plain' })));
    it('PUT', async () => expectClient4xx(await raw(`${t.baseUrl}/graphql`, { method: 'PUT', body: '{}', headers: { 'content-type': 'application/json' } })));
    it('huge body', async () => expectClient4xx(await gql({ query: `{ viewer { kind } } # ${'x'.repeat(3_000_000)}` })));
    it('batched array', async () => expectClient4xx(await gql([{ query: '{ viewer { kind } }' }, 5])));
  });
});

describe.each(testBackends())('unexpected failures are masked (%s)', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
    await t.database.close(); // every query now fails with a driver error the caller must not see
  }, 60_000);
  afterAll(async () => t?.app.close());

  it('tRPC answers a 500 without the underlying error message', async () => {
    const r = await raw(`${t.baseUrl}/trpc/catalog.list`);
    expect(r.status).toBe(500);
    expect(r.contentType).toMatch(/json/);
    expect(r.json.error.message).toBe('Internal server error.');
    expect(r.text).not.toMatch(/closed|pool|PGlite|\n\s+at /i);
  });

  it('GraphQL masks it as "Unexpected error."', async () => {
    const r = await raw(`${t.baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ catalogFacets { tags { value } } }' }),
    });
    expect(r.json.errors[0]).toMatchObject({ message: 'Unexpected error.', extensions: { code: 'internal_error' } });
    expect(r.text).not.toMatch(/closed|pool|PGlite/i);
  });
});

describe('the console served with the API', () => {
  let t: RunningApp;

  beforeAll(async () => {
    t = await consoleAppOn({ 'index.html': '<!doctype html><html><body>console</body></html>', 'assets/index-abc123.js': 'console.log(1)' });
  }, 60_000);
  afterAll(async () => t?.close());

  it('a missing asset is a JSON 404, not the SPA page with 200', async () => {
    for (const path of ['/assets/index-old999.js', '/assets/missing.css', '/assets/deep/nope.woff2', '/assets/']) {
      const r = await raw(`${t.baseUrl}${path}`);
      expect(r.status, path).toBe(404);
      expect(r.contentType, path).toMatch(/json/);
      expect(r.text, path).not.toMatch(/<html/i);
      expect(r.json.error.code, path).toBe('not_found');
    }
  });

  it('an asset that exists is served, and navigation paths still get the SPA page', async () => {
    const asset = await raw(`${t.baseUrl}/assets/index-abc123.js`);
    expect(asset.status).toBe(200);
    expect(asset.text).toBe('console.log(1)');
    for (const path of ['/', '/tenants/abc/keys', '/catalog/meta-llama/Llama-3.1-8B', '/assets-overview']) {
      const page = await raw(`${t.baseUrl}${path}`);
      expect(page.status, path).toBe(200);
      expect(page.text, path).toContain('console</body>');
    }
  });
});
