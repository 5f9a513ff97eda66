import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends } from '@infer/db/testing';
import { hashSecret } from '@infer/shared';
import { buildAdminApp } from '../src/app.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession, MAX_SESSIONS_PER_USER, SESSION_TTL_MS, validateSession } from '../src/modules/auth/sessions.ts';
import { addMember, createTenant } from '../src/modules/tenants/tenants.service.ts';
import { NODE_TOKEN, startTestApp, type TestApp } from './helpers.ts';
import { PASSWORD, PUBLIC_URLS, trpc } from './trpc-fixtures.ts';

const cookieOf = (setCookie: string[]): string => {
  const c = setCookie.find((s) => s.startsWith('session='));
  if (!c) throw new Error('no session cookie set');
  return c.split(';')[0]!;
};
const tokenOf = (cookie: string): string => cookie.slice('session='.length);

describe.each(testBackends())('console sessions over HTTP (%s)', (kind) => {
  let t: TestApp;
  let email: string;
  let tenantId: string;
  let origin: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    origin = t.baseUrl;
    const user = await createUser(t.database.db, { email: 'Ada@Example.com', password: PASSWORD });
    email = user.email;
    const tenant = await createTenant(t.database.db, { slug: 'ada-co', name: 'Ada Co' });
    tenantId = tenant.id;
    await addMember(t.database.db, { tenantId, userId: user.id, role: 'owner' });
  }, 60_000);
  afterAll(async () => t?.close());

  async function login(headers: Record<string, string> = { origin }) {
    const res = await trpc<{ user: { email: string } }>(t.baseUrl, 'auth.login', {
      mutation: true,
      input: { email: 'ada@example.com', password: PASSWORD },
      headers,
    });
    expect(res.status).toBe(200);
    return { res, cookie: cookieOf(res.setCookie) };
  }
  const me = (cookie: string) =>
    trpc<{ user: { email: string }; tenants: { id: string; role: string }[] } | null>(t.baseUrl, 'auth.me', { headers: { cookie } });
  const sessionRow = (token: string) => t.database.db.selectFrom('sessions').select(['id', 'expiresAt']).where('id', '=', hashSecret(token)).executeTakeFirst();

  it('logs in with an HttpOnly SameSite=Lax cookie, stores only the token hash, and `me` works with it', async () => {
    const { res, cookie } = await login();
    const header = res.setCookie.find((s) => s.startsWith('session='))!;
    expect(header).toMatch(/; HttpOnly/);
    expect(header).toMatch(/; SameSite=Lax/);
    expect(header).toMatch(/; Path=\//);
    expect(header).toMatch(new RegExp(`; Max-Age=(${SESSION_TTL_MS / 1000}|${SESSION_TTL_MS / 1000 - 1})(;|$)`));
    expect(header).not.toMatch(/Secure/);
    expect(res.body.result?.data.user.email).toBe(email);
    expect(JSON.stringify(res.body)).not.toContain(tokenOf(cookie));

    const token = tokenOf(cookie);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await sessionRow(token)).toBeDefined();
    const all = JSON.stringify(await t.database.db.selectFrom('sessions').selectAll().execute());
    expect(all).not.toContain(token);

    const who = await me(cookie);
    expect(who.body.result?.data).toMatchObject({ user: { email }, tenants: [{ id: tenantId, role: 'owner' }] });
    const keys = await trpc<unknown[]>(t.baseUrl, 'keys.list', { input: { tenantId }, headers: { cookie } });
    expect(keys.status).toBe(200);
  });

  it('ignores forwarded headers from a client that is not a trusted proxy', async () => {
    // Behind a trusted proxy the cookie gets Secure: see transport-security.test.ts.
    const res = await trpc(t.baseUrl, 'auth.login', {
      mutation: true,
      input: { email, password: PASSWORD },
      headers: { origin: 'https://console.example', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'console.example' },
    });
    expect(res.status).toBe(403);
    expect(res.setCookie).toEqual([]);
  });

  it('refuses wrong passwords and unknown emails alike', async () => {
    const wrong = await trpc(t.baseUrl, 'auth.login', { mutation: true, input: { email, password: 'nope-nope' }, headers: { origin, 'x-forwarded-for': '1' } });
    const unknown = await trpc(t.baseUrl, 'auth.login', { mutation: true, input: { email: 'nobody@example.com', password: 'nope-nope' }, headers: { origin } });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.body.error?.message).toBe(unknown.body.error?.message);
    expect(wrong.setCookie.filter((s) => s.startsWith('session=') && !s.includes('Max-Age=0'))).toEqual([]);
  });

  it('treats an expired session as logged out and deletes it', async () => {
    const { cookie } = await login();
    const id = hashSecret(tokenOf(cookie));
    await t.database.db
      .updateTable('sessions')
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where('id', '=', id)
      .execute();
    const who = await me(cookie);
    expect(who.status).toBe(200);
    expect(who.body.result?.data).toBeNull();
    expect(who.setCookie.some((s) => s.startsWith('session=;') && s.includes('Max-Age=0'))).toBe(true);
    const keys = await trpc(t.baseUrl, 'keys.list', { input: { tenantId }, headers: { cookie } });
    expect(keys.status).toBe(401);
    expect(await sessionRow(tokenOf(cookie))).toBeUndefined();
  });

  it('keeps at most MAX_SESSIONS_PER_USER live sessions per user: a login past it ends the least recently renewed', async () => {
    // Red-team finding: 80 logins left 81 live sessions of 30 days each.
    const user = await createUser(t.database.db, { email: `many-${kind}@example.com`, password: PASSWORD });
    const first = await createSession(t.database.db, user.id);
    // The first one was renewed least recently.
    await t.database.db
      .updateTable('sessions')
      .set({ expiresAt: new Date(Date.now() + 60_000) })
      .where('id', '=', first.session.id)
      .execute();
    for (let i = 1; i < MAX_SESSIONS_PER_USER; i++) await createSession(t.database.db, user.id);
    const count = async () =>
      Number(
        (
          await t.database.db
            .selectFrom('sessions')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('userId', '=', user.id)
            .executeTakeFirstOrThrow()
        ).n,
      );
    expect(await count()).toBe(MAX_SESSIONS_PER_USER);
    expect(await sessionRow(first.token)).toBeDefined(); // (validating it would renew it)
    const latest = await createSession(t.database.db, user.id);
    expect(await count()).toBe(MAX_SESSIONS_PER_USER);
    expect(await validateSession(t.database.db, first.token)).toBeNull();
    expect((await validateSession(t.database.db, latest.token))?.user.id).toBe(user.id);
  });

  it('slides the expiry when less than half the lifetime remains', async () => {
    const { cookie } = await login();
    const token = tokenOf(cookie);
    const soon = new Date(Date.now() + 24 * 3600 * 1000);
    await t.database.db.updateTable('sessions').set({ expiresAt: soon }).where('id', '=', hashSecret(token)).execute();
    const who = await me(cookie);
    expect(who.body.result?.data?.user.email).toBe(email);
    const row = await sessionRow(token);
    expect(row!.expiresAt.getTime()).toBeGreaterThan(Date.now() + SESSION_TTL_MS - 60_000);
    expect(who.setCookie.some((s) => s.startsWith(`${cookie};`) && /Max-Age=259\d{4}/.test(s))).toBe(true);

    // A fresh session (more than half left) is not rewritten on every request.
    const again = await me(cookie);
    expect(again.setCookie).toEqual([]);
  });

  it('logs out: deletes the row, clears the cookie, and the old cookie stops working', async () => {
    const { cookie } = await login();
    const out = await trpc(t.baseUrl, 'auth.logout', { mutation: true, headers: { cookie, origin } });
    expect(out.status).toBe(200);
    expect(out.setCookie.some((s) => s.startsWith('session=;') && s.includes('Max-Age=0') && s.includes('HttpOnly'))).toBe(true);
    expect(await sessionRow(tokenOf(cookie))).toBeUndefined();
    expect((await me(cookie)).body.result?.data).toBeNull();
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId }, headers: { cookie } })).status).toBe(401);
  });

  it('cannot be used with a stolen session row (the stored hash is not a token)', async () => {
    const { cookie } = await login();
    const row = await sessionRow(tokenOf(cookie));
    const stolen = `session=${row!.id}`;
    expect((await me(stolen)).body.result?.data).toBeNull();
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId }, headers: { cookie: stolen } })).status).toBe(401);
    // Same length as a real token, still useless: lookups go by hash of what is presented.
    const forged = `session=${Buffer.from(row!.id, 'hex').toString('base64url')}`;
    expect((await me(forged)).body.result?.data).toBeNull();
  });

  it('refuses cookie-authenticated mutations from another origin (403) and accepts same-origin ones', async () => {
    const { cookie } = await login();
    const create = (headers: Record<string, string>) =>
      trpc<{ key: { id: string } }>(t.baseUrl, 'keys.create', { mutation: true, input: { tenantId, name: 'csrf' }, headers: { cookie, ...headers } });
    const count = async () => (await t.database.db.selectFrom('apiKeys').select('id').where('tenantId', '=', tenantId).execute()).length;
    const before = await count();

    const evil = await create({ origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.body.error?.data.code).toBe('FORBIDDEN');
    expect((await create({ referer: 'https://evil.example/page' })).status).toBe(403);
    expect((await create({})).status).toBe(403); // neither Origin nor Referer
    expect((await create({ origin: 'null' })).status).toBe(403);
    expect(await count()).toBe(before);

    expect((await create({ origin })).status).toBe(200);
    expect((await create({ referer: `${origin}/keys` })).status).toBe(200);
    // X-Forwarded-Host from a client that is not a configured trusted proxy is ignored (finding 1).
    expect((await create({ origin: 'https://console.example', 'x-forwarded-host': 'console.example' })).status).toBe(403);
    expect(await count()).toBe(before + 2);

    // Logout is a mutation too; login CSRF (a browser Origin elsewhere) is refused.
    expect((await trpc(t.baseUrl, 'auth.logout', { mutation: true, headers: { cookie, origin: 'https://evil.example' } })).status).toBe(403);
    expect(await sessionRow(tokenOf(cookie))).toBeDefined();
    const csrfLogin = await trpc(t.baseUrl, 'auth.login', {
      mutation: true,
      input: { email, password: PASSWORD },
      headers: { origin: 'https://evil.example' },
    });
    expect(csrfLogin.status).toBe(403);
    expect(csrfLogin.setCookie).toEqual([]);
    // Cookie-authenticated reads from a foreign origin are refused too; without an Origin they work.
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId }, headers: { cookie, origin: 'https://evil.example' } })).status).toBe(403);
    expect((await trpc(t.baseUrl, 'keys.list', { input: { tenantId }, headers: { cookie } })).status).toBe(200);
  });

  it('throttles failed logins per email and IP with a clear 429', async () => {
    const user = await createUser(t.database.db, { email: 'throttle@example.com', password: PASSWORD });
    const attempt = (password: string, who = user.email) =>
      trpc(t.baseUrl, 'auth.login', { mutation: true, input: { email: who, password }, headers: { origin } });
    for (let i = 0; i < 5; i++) expect((await attempt('wrong-password')).status).toBe(401);
    const blocked = await attempt(PASSWORD); // even the right password waits out the window
    expect(blocked.status).toBe(429);
    expect(blocked.body.error?.data.code).toBe('TOO_MANY_REQUESTS');
    expect(blocked.body.error?.message).toMatch(/too many failed login attempts/);
    expect(blocked.setCookie.filter((s) => !s.includes('Max-Age=0'))).toEqual([]);
    // Another account from the same address is unaffected.
    expect((await attempt(PASSWORD, 'ada@example.com')).status).toBe(200);
  });
});

describe('allowed console origins and logging', () => {
  it('accepts mutations from CONSOLE_ORIGINS and never logs passwords or tokens', async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const database = await createTestDb('pglite');
    const app = await buildAdminApp({
      db: database.db,
      dbKind: 'pglite',
      nodeToken: NODE_TOKEN,
      publicUrls: PUBLIC_URLS,
      consoleOrigins: ['https://console.example.com'],
      logger: { level: 'trace', stream },
    });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const user = await createUser(database.db, { email: 'log@example.com', password: PASSWORD });
      const tenant = await createTenant(database.db, { slug: 'log', name: 'Log' });
      await addMember(database.db, { tenantId: tenant.id, userId: user.id, role: 'owner' });
      const res = await trpc(base, 'auth.login', {
        mutation: true,
        input: { email: user.email, password: PASSWORD },
        headers: { origin: 'https://console.example.com' },
      });
      expect(res.status).toBe(200);
      const cookie = cookieOf(res.setCookie);
      const created = await trpc<{ secret: string }>(base, 'keys.create', {
        mutation: true,
        input: { tenantId: tenant.id, name: 'k' },
        headers: { cookie, origin: 'https://console.example.com' },
      });
      expect(created.status).toBe(200);
      expect(
        (
          await trpc(base, 'keys.create', {
            mutation: true,
            input: { tenantId: tenant.id, name: 'k' },
            headers: { cookie, origin: 'https://other.example.com' },
          })
        ).status,
      ).toBe(403);
      await trpc(base, 'auth.login', {
        mutation: true,
        input: { email: user.email, password: 'wrong-secret-pw' },
        headers: { origin: 'https://console.example.com' },
      });
      const log = lines.join('');
      expect(log.length).toBeGreaterThan(0);
      for (const secret of [PASSWORD, 'wrong-secret-pw', tokenOf(cookie), created.body.result!.data.secret]) expect(log).not.toContain(secret);
    } finally {
      await app.close();
      await database.close();
    }
  }, 60_000);
});
