import { randomBytes } from 'node:crypto';
import { hashSecret } from '@infer/shared';
import type { Db } from '../../db.ts';
import type { User } from './auth.service.ts';

/** Sessions follow the Lucia model: a random token in the cookie, only its SHA-256 in the database. */
export const SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000;
export const SESSION_COOKIE = 'session';

export interface Session {
  /** SHA-256 hex of the token (the row id); never the token. */
  id: string;
  userId: string;
  expiresAt: Date;
}

export interface ValidatedSession {
  user: User;
  session: Session;
  /** True when this call extended the expiry (the cookie should be re-sent). */
  renewed: boolean;
}

// 32 random bytes as base64url: 43 characters.
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/**
 * Live sessions a user may hold (browsers, devices): each login adds one for 30 days, so a script logging in on every
 * run would otherwise pile up rows (and sessions to steal) without end. Past it the least recently renewed go.
 */
export const MAX_SESSIONS_PER_USER = 50;

/** Starts a session; the returned token goes into the cookie and is never stored. */
export async function createSession(db: Db, userId: string): Promise<{ token: string; session: Session }> {
  const token = randomBytes(32).toString('base64url');
  const session: Session = { id: hashSecret(token), userId, expiresAt: new Date(Date.now() + SESSION_TTL_MS) };
  await db.insertInto('sessions').values(session).execute();
  await db
    .deleteFrom('sessions')
    .where('userId', '=', userId)
    .where('id', 'not in', (qb) =>
      qb.selectFrom('sessions').select('id').where('userId', '=', userId).orderBy('expiresAt', 'desc').orderBy('id').limit(MAX_SESSIONS_PER_USER),
    )
    .execute();
  return { token, session };
}

/**
 * The user and session of a token, or null (unknown, expired: the row is then deleted). Sliding
 * expiry: when less than half the lifetime remains, the session is extended to a full one.
 */
export async function validateSession(db: Db, token: string): Promise<ValidatedSession | null> {
  if (!TOKEN.test(token)) return null;
  const id = hashSecret(token);
  const row = await db
    .selectFrom('sessions as s')
    .innerJoin('users as u', 'u.id', 's.userId')
    .select(['s.id', 's.userId', 's.expiresAt', 'u.email', 'u.displayName', 'u.isPlatformAdmin', 'u.createdAt'])
    .where('s.id', '=', id)
    .executeTakeFirst();
  if (!row) return null;
  const now = Date.now();
  const user: User = { id: row.userId, email: row.email, displayName: row.displayName, isPlatformAdmin: row.isPlatformAdmin, createdAt: row.createdAt };
  if (row.expiresAt.getTime() <= now) {
    await db.deleteFrom('sessions').where('id', '=', id).execute();
    return null;
  }
  let expiresAt = row.expiresAt;
  let renewed = false;
  if (expiresAt.getTime() - now < SESSION_TTL_MS / 2) {
    expiresAt = new Date(now + SESSION_TTL_MS);
    await db.updateTable('sessions').set({ expiresAt }).where('id', '=', id).execute();
    renewed = true;
  }
  return { user, session: { id, userId: row.userId, expiresAt }, renewed };
}

/** Ends one session (logout). */
export async function invalidateSession(db: Db, sessionId: string): Promise<void> {
  await db.deleteFrom('sessions').where('id', '=', sessionId).execute();
}

/**
 * Ends every session of a user (password change, account removal), or every one but `except`
 * (the session that changed the password stays logged in). Returns how many ended.
 */
export async function invalidateUserSessions(db: Db, userId: string, opts: { except?: string } = {}): Promise<number> {
  let q = db.deleteFrom('sessions').where('userId', '=', userId);
  if (opts.except !== undefined) q = q.where('id', '!=', opts.except);
  const res = await q.executeTakeFirst();
  return Number(res.numDeletedRows);
}

/** Removes expired rows (the app's sweeper runs it periodically). */
export async function deleteExpiredSessions(db: Db): Promise<number> {
  const res = await db.deleteFrom('sessions').where('expiresAt', '<=', new Date()).executeTakeFirst();
  return Number(res.numDeletedRows);
}

export interface SessionSweeper {
  /** Runs one sweep now (tests; also what the timer runs). */
  sweepNow(): Promise<number>;
  stop(): void;
}

/**
 * Deletes expired sessions (and finished login-throttle windows through `also`) every
 * `intervalMs`; a failed sweep is reported and retried on the next tick. The timer does not keep
 * the process alive.
 */
export function startSessionSweeper(
  db: Db,
  opts: { intervalMs: number; also?: () => Promise<unknown>; onSwept?: (deleted: number) => void; onError?: (err: unknown) => void },
): SessionSweeper {
  let running: Promise<number> | undefined;
  const sweepNow = (): Promise<number> =>
    (running ??= (async () => {
      try {
        const deleted = await deleteExpiredSessions(db);
        await opts.also?.();
        opts.onSwept?.(deleted);
        return deleted;
      } finally {
        running = undefined;
      }
    })());
  const timer = setInterval(() => void sweepNow().catch((err: unknown) => opts.onError?.(err)), opts.intervalMs);
  timer.unref();
  return { sweepNow, stop: () => clearInterval(timer) };
}

/** The `Set-Cookie` value that stores a session token. */
export function sessionCookie(token: string, expiresAt: Date, secure: boolean): string {
  const maxAge = Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000));
  return [
    `${SESSION_COOKIE}=${token}`,
    'HttpOnly',
    'SameSite=Lax',
    'Path=/',
    `Max-Age=${maxAge}`,
    `Expires=${expiresAt.toUTCString()}`,
    ...(secure ? ['Secure'] : []),
  ].join('; ');
}

/** The `Set-Cookie` value that clears the session cookie. */
export function blankSessionCookie(secure: boolean): string {
  return [`${SESSION_COOKIE}=`, 'HttpOnly', 'SameSite=Lax', 'Path=/', 'Max-Age=0', ...(secure ? ['Secure'] : [])].join('; ');
}

/** The session token in a `Cookie` header, if any. */
export function readSessionToken(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return value === '' ? undefined : value;
    }
  }
  return undefined;
}
