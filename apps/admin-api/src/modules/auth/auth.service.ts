import type { Db } from '../../db.ts';
import { checkName } from '../../check-name.ts';
import { isUniqueViolation, ServiceError } from '../../errors.ts';
import { hashPassword, verifyPassword } from './password.ts';
import type { LoginThrottle } from './login-throttle.ts';
import { requireAuthenticated } from '../access/access.ts';
import type { Principal } from '../access/principal.ts';
import { writeAudit } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { createSession, invalidateUserSessions, type Session } from './sessions.ts';

export { hashPassword, verifyPassword } from './password.ts';

export interface User {
  id: string;
  email: string;
  displayName: string | null;
  isPlatformAdmin: boolean;
  createdAt: Date;
}

const userColumns = ['id', 'email', 'displayName', 'isPlatformAdmin', 'createdAt'] as const;

export interface CreateUserInput {
  readonly email: string;
  readonly password: string;
  readonly displayName?: string | null;
  readonly isPlatformAdmin?: boolean;
}

/** A user's display name, at most. */
const DISPLAY_NAME_MAX = 200;

const normaliseEmail = (email: string): string => email.trim().toLowerCase();

/** Creates a user with a scrypt password hash; the email is stored lowercased. */
export async function createUser(db: Db, input: CreateUserInput): Promise<User> {
  const email = normaliseEmail(input.email);
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new ServiceError('invalid', 'email is not valid', 'email');
  if (input.password.length < 8) throw new ServiceError('invalid', 'password must be at least 8 characters', 'password');
  const displayName = input.displayName == null ? null : checkName(input.displayName, 'displayName', { min: 0, max: DISPLAY_NAME_MAX }) || null;
  const passwordHash = await hashPassword(input.password);
  try {
    return await db
      .insertInto('users')
      .values({ email, passwordHash, displayName, isPlatformAdmin: input.isPlatformAdmin ?? false })
      .returning(userColumns)
      .executeTakeFirstOrThrow();
  } catch (err) {
    if (isUniqueViolation(err)) throw new ServiceError('conflict', 'a user with that email already exists', 'email');
    throw err;
  }
}

/** Replaces a user's password (the demo launcher resets the demo admin's when its credentials file is gone). */
export async function setPassword(db: Db, userId: string, password: string): Promise<void> {
  if (password.length < 8) throw new ServiceError('invalid', 'password must be at least 8 characters', 'password');
  const passwordHash = await hashPassword(password);
  const result = await db.updateTable('users').set({ passwordHash }).where('id', '=', userId).executeTakeFirst();
  if (result.numUpdatedRows === 0n) throw new ServiceError('not_found', 'user not found');
}

export async function getUserById(db: Db, id: string): Promise<User | null> {
  return (await db.selectFrom('users').select(userColumns).where('id', '=', id).executeTakeFirst()) ?? null;
}

// A real hash to compare against when the email is unknown, so both paths cost the same.
let dummyHash: Promise<string> | undefined;

/** The user whose email and password match, or null (same work either way). */
export async function verifyCredentials(db: Db, email: string, password: string): Promise<User | null> {
  const row = await db
    .selectFrom('users')
    .select([...userColumns, 'passwordHash'])
    .where('email', '=', normaliseEmail(email))
    .executeTakeFirst();
  if (!row) {
    await verifyPassword(password, await (dummyHash ??= hashPassword('not-a-real-password')));
    return null;
  }
  const { passwordHash, ...user } = row;
  return (await verifyPassword(password, passwordHash)) ? user : null;
}

export interface LoginResult {
  user: User;
  /** The session token for the cookie; never logged or stored. */
  token: string;
  session: Session;
}

/**
 * Checks email + password (same work for unknown emails) and starts a session. The attempt is
 * counted per account, per client IP and per both before the password is checked (see
 * `LoginThrottle`). Wrong credentials and unknown emails give the same error.
 */
export async function login(db: Db, input: { email: string; password: string; ip: string }, throttle: LoginThrottle): Promise<LoginResult> {
  const attempt = await throttle.begin(input.email, input.ip);
  const user = await verifyCredentials(db, input.email, input.password);
  if (!user) throw new ServiceError('unauthenticated', 'email or password is incorrect');
  await attempt.succeeded();
  // Housekeeping: this user's expired sessions go now (the sweeper takes everyone's).
  await db.deleteFrom('sessions').where('userId', '=', user.id).where('expiresAt', '<=', new Date()).execute();
  const { token, session } = await createSession(db, user.id);
  return { user, token, session };
}

/**
 * A user changes their own password: the current one must be right (counted like a login, so a
 * stolen session cannot be used to guess it), and every other session of the user ends, so a
 * password change locks out whoever else was logged in. The caller's own session stays.
 */
export async function changePassword(
  db: Db,
  principal: Principal,
  input: { currentPassword: string; newPassword: string; ip: string },
  throttle: LoginThrottle,
): Promise<{ endedSessions: number }> {
  requireAuthenticated(principal);
  if (principal.kind !== 'user') throw new ServiceError('forbidden', 'only a logged-in user can change their password (not an admin token)');
  if (input.newPassword.length < 8) throw new ServiceError('invalid', 'newPassword must be at least 8 characters', 'newPassword');
  if (input.newPassword === input.currentPassword) throw new ServiceError('invalid', 'newPassword must differ from the current password', 'newPassword');
  const attempt = await throttle.begin(principal.email, input.ip);
  const user = await verifyCredentials(db, principal.email, input.currentPassword);
  if (!user || user.id !== principal.userId) throw new ServiceError('invalid', 'the current password is incorrect', 'currentPassword');
  await attempt.succeeded();
  const passwordHash = await hashPassword(input.newPassword);
  return withTransaction(db, async (trx) => {
    await trx.updateTable('users').set({ passwordHash }).where('id', '=', user.id).execute();
    const ended = await invalidateUserSessions(trx, user.id, { except: principal.sessionId });
    await writeAudit(trx, {
      actor: { userId: user.id },
      tenantId: null,
      action: 'user.password_change',
      targetType: 'user',
      targetId: user.id,
      detail: { endedSessions: ended },
    });
    return { endedSessions: ended };
  });
}

export async function getUserByEmail(db: Db, email: string): Promise<User | null> {
  return (await db.selectFrom('users').select(userColumns).where('email', '=', normaliseEmail(email)).executeTakeFirst()) ?? null;
}
