import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { hashSecret } from '@infer/shared';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import { appOn, cookieOf, type RunningApp } from './app-on.ts';
import { buildWorld, PASSWORD, trpc, type World } from './trpc-fixtures.ts';

const NEW_PASSWORD = 'a much better passphrase';

describe.each(testBackends())('password change and session sweeping (%s)', (kind) => {
  let database: TestDatabase;
  let w: World;
  let t: RunningApp;

  beforeAll(async () => {
    database = await createTestDb(kind);
    w = await buildWorld(database.db);
    t = await appOn(database, { sessionSweepMs: 100 });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await database?.close();
  });

  const login = async (email: string, password: string) =>
    trpc<unknown>(t.baseUrl, 'auth.login', { mutation: true, input: { email, password }, headers: { origin: t.baseUrl } });
  const me = async (cookie: string) => (await trpc<{ kind: string } | null>(t.baseUrl, 'auth.me', { headers: { cookie } })).body.result?.data ?? null;

  it("ends the user's other sessions (a stolen one included) and keeps the caller's", async () => {
    const user = await createUser(database.db, { email: 'rotate@example.com', password: PASSWORD });
    const mine = cookieOf((await login(user.email, PASSWORD)).setCookie);
    const laptop = cookieOf((await login(user.email, PASSWORD)).setCookie);
    const stolen = `session=${(await createSession(database.db, user.id)).token}`;
    for (const c of [mine, laptop, stolen]) expect(await me(c)).not.toBeNull();

    const changed = await trpc<{ endedSessions: number }>(t.baseUrl, 'auth.changePassword', {
      mutation: true,
      input: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD },
      headers: { cookie: mine, origin: t.baseUrl },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.result?.data.endedSessions).toBe(2);
    expect(await me(mine)).not.toBeNull();
    expect(await me(laptop)).toBeNull();
    expect(await me(stolen)).toBeNull();
    expect((await login(user.email, PASSWORD)).status).toBe(401);
    expect((await login(user.email, NEW_PASSWORD)).status).toBe(200);
    const audit = await database.db.selectFrom('auditLog').select(['action', 'detail']).where('targetId', '=', user.id).execute();
    expect(audit.map((a) => a.action)).toContain('user.password_change');
    expect(JSON.stringify(audit)).not.toContain(NEW_PASSWORD);
  });

  it('refuses a wrong current password (naming the field), admin tokens, anonymous callers, cross-origin pages and batches', async () => {
    const cookie = w.parties.memberA.cookie!;
    const wrong = await trpc(t.baseUrl, 'auth.changePassword', {
      mutation: true,
      input: { currentPassword: 'not it', newPassword: NEW_PASSWORD },
      headers: { cookie, origin: t.baseUrl },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error?.data.param).toBe('currentPassword');
    const short = await trpc(t.baseUrl, 'auth.changePassword', {
      mutation: true,
      input: { currentPassword: PASSWORD, newPassword: 'short' },
      headers: { cookie, origin: t.baseUrl },
    });
    expect(short.status).toBe(400);
    expect(short.body.error?.message).toMatch(/^newPassword: /);
    const token = await trpc(t.baseUrl, 'auth.changePassword', {
      mutation: true,
      input: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD },
      headers: { authorization: w.parties.tokenA.authorization! },
    });
    expect(token.status).toBe(403);
    const anonymous = await trpc(t.baseUrl, 'auth.changePassword', {
      mutation: true,
      input: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD },
      headers: { origin: t.baseUrl },
    });
    expect(anonymous.status).toBe(401);
    const csrf = await trpc(t.baseUrl, 'auth.changePassword', {
      mutation: true,
      input: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD },
      headers: { cookie, origin: 'https://evil.example' },
    });
    expect(csrf.status).toBe(403);
    const batch = await fetch(`${t.baseUrl}/trpc/auth.changePassword,auth.changePassword?batch=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie, origin: t.baseUrl },
      body: JSON.stringify({ 0: { currentPassword: 'guess-1', newPassword: NEW_PASSWORD }, 1: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD } }),
    });
    const items = (await batch.json()) as { error?: { message: string } }[];
    expect(items.map((i) => i.error?.message)).toEqual([expect.stringMatching(/cannot be batched/), expect.stringMatching(/cannot be batched/)]);
    // Still the old password: nothing above changed it.
    expect((await login(w.parties.memberA.email!, PASSWORD)).status).toBe(200);
  });

  it('sweeps expired sessions periodically (the timer the app starts)', async () => {
    const user = await createUser(database.db, { email: 'sweep@example.com', password: PASSWORD });
    const expired = hashSecret('expired-session-token');
    await database.db
      .insertInto('sessions')
      .values({ id: expired, userId: user.id, expiresAt: new Date(Date.now() - 1000) })
      .execute();
    const live = await createSession(database.db, user.id);
    const exists = async (id: string) => (await database.db.selectFrom('sessions').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
    for (let i = 0; i < 200 && (await exists(expired)); i++) await new Promise((r) => setTimeout(r, 50));
    expect(await exists(expired)).toBe(false);
    expect(await exists(live.session.id)).toBe(true);
    // The sweeper is the app's: one sweep on demand reports what it deleted.
    await database.db
      .insertInto('sessions')
      .values({ id: hashSecret('expired-2'), userId: user.id, expiresAt: new Date(Date.now() - 1000) })
      .execute();
    expect(await t.app.sessionSweeper.sweepNow()).toBeGreaterThanOrEqual(0);
    expect(await exists(hashSecret('expired-2'))).toBe(false);
  });
});
