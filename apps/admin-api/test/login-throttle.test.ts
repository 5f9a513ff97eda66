import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { appOn, type RunningApp } from './app-on.ts';
import { PASSWORD, trpc } from './trpc-fixtures.ts';

interface BatchItem {
  result?: { data: unknown };
  error?: { message: string; data: { code: string; httpStatus: number } };
}

/** A tRPC batch of `inputs` to one procedure in ONE HTTP request, as httpBatchLink sends it. */
async function batch(baseUrl: string, path: string, inputs: unknown[], headers: Record<string, string>) {
  const body: Record<string, unknown> = {};
  inputs.forEach((input, i) => (body[i] = input));
  const res = await fetch(`${baseUrl}/trpc/${inputs.map(() => path).join(',')}?batch=1`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, setCookie: res.headers.getSetCookie(), items: (await res.json()) as BatchItem[] };
}

/**
 * Finding 3: 39 wrong passwords and the right one in one batched request were all evaluated and the
 * success reset the counter. Attempts are now counted in PostgreSQL before the password is checked,
 * and credential procedures refuse batches.
 */
describe.each(testBackends())('login throttle (%s)', (kind) => {
  let database: TestDatabase;
  let a: RunningApp;
  let b: RunningApp;
  let seq = 0;
  const newUser = async () => createUser(database.db, { email: `victim-${++seq}@example.com`, password: PASSWORD });

  beforeAll(async () => {
    database = await createTestDb(kind);
    // Two control-plane replicas over one database.
    a = await appOn(database);
    b = await appOn(database);
  }, 60_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await database?.close();
  });

  const login = (app: RunningApp, email: string, password: string, headers: Record<string, string> = {}) =>
    trpc(app.baseUrl, 'auth.login', { mutation: true, input: { email, password }, headers: { origin: app.baseUrl, ...headers } });

  it('refuses a batch of 39 wrong passwords and the right one, and no session comes of it', async () => {
    const user = await newUser();
    const inputs = [...Array.from({ length: 39 }, (_, i) => ({ email: user.email, password: `wrong-${i}` })), { email: user.email, password: PASSWORD }];
    const res = await batch(a.baseUrl, 'auth.login', inputs, { origin: a.baseUrl });
    expect(res.items).toHaveLength(40);
    for (const item of res.items) {
      expect(item.result).toBeUndefined();
      expect(item.error?.data.code).toBe('BAD_REQUEST');
      expect(item.error?.message).toMatch(/cannot be batched/);
    }
    expect(res.setCookie.filter((c) => c.startsWith('session=') && !c.includes('Max-Age=0'))).toEqual([]);
    expect(await database.db.selectFrom('sessions').select('id').where('userId', '=', user.id).execute()).toEqual([]);
    // A batch of one (what the console's batch link sends for a lone login) is fine.
    const single = await batch(a.baseUrl, 'auth.login', [{ email: user.email, password: PASSWORD }], { origin: a.baseUrl });
    expect(single.items[0]?.result).toBeDefined();
  });

  it('counts before verifying: 20 parallel guesses check at most 5 passwords', async () => {
    const user = await newUser();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => login(a, user.email, `parallel-${i}`)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    // ...and then not even the right password gets checked.
    const refused = await login(a, user.email, PASSWORD);
    expect(refused.status).toBe(429);
    // Retry-After: the rest of the 15-minute window, in whole seconds.
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(14 * 60);
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(15 * 60);
  });

  it('shares the counter between two app instances on one database', async () => {
    const user = await newUser();
    for (let i = 0; i < 3; i++) expect((await login(a, user.email, `wrong-a-${i}`)).status).toBe(401);
    for (let i = 0; i < 2; i++) expect((await login(b, user.email, `wrong-b-${i}`)).status).toBe(401);
    const blockedOnA = await login(a, user.email, PASSWORD);
    const blockedOnB = await login(b, user.email, PASSWORD);
    expect(blockedOnA.status).toBe(429);
    expect(blockedOnB.status).toBe(429);
    expect(blockedOnB.body.error?.message).toMatch(/too many failed login attempts/);
    const rows = await database.db.selectFrom('authThrottle').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(user.email); // keys are hashed
  });

  it('limits one client address across accounts (spraying) and ignores X-Forwarded-For from untrusted clients', async () => {
    const spray = await createTestDb(kind);
    const c = await appOn(spray, { loginLimits: { perIp: 6 } });
    try {
      const statuses: number[] = [];
      // Unknown accounts cost the same as known ones, and count against the address all the same.
      for (let i = 0; i < 8; i++) statuses.push((await login(c, `spray-${i}@example.com`, 'guess', { 'x-forwarded-for': `10.0.0.${i}` })).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401, 401, 429, 429]);
      // A refused address makes no counters for the accounts it tries: one for the address, two per account it got to.
      const rows = await spray.db
        .selectFrom('authThrottle')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      for (let i = 8; i < 40; i++) expect((await login(c, `spray-${i}@example.com`, 'guess')).status).toBe(429);
      const after = await spray.db
        .selectFrom('authThrottle')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      expect([Number(rows.n), Number(after.n)]).toEqual([1 + 2 * 6, 1 + 2 * 6]);
    } finally {
      await c.close();
      await spray.close();
    }
  }, 60_000);

  it('behind a trusted proxy, the address limit applies to the client X-Forwarded-For names', async () => {
    const spray = await createTestDb(kind);
    const proxied = await appOn(spray, { loginLimits: { perIp: 2 }, trustProxy: ['127.0.0.1'] });
    try {
      const from = (ip: string, i: number) => login(proxied, `proxied-${i}@example.com`, 'guess', { 'x-forwarded-for': ip });
      expect([(await from('203.0.113.7', 1)).status, (await from('203.0.113.7', 2)).status, (await from('203.0.113.7', 3)).status]).toEqual([401, 401, 429]);
      // Another client behind the same proxy has its own count.
      expect((await from('198.51.100.9', 4)).status).toBe(401);
    } finally {
      await proxied.close();
      await spray.close();
    }
  }, 60_000);

  it('a successful login does not count against the limit', async () => {
    const user = await newUser();
    for (let i = 0; i < 8; i++) expect((await login(b, user.email, PASSWORD)).status).toBe(200);
  });
});
