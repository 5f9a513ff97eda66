import { sql } from 'kysely';
import { hashSecret } from '@infer/shared';
import type { Db } from '../../db.ts';
import { ServiceError } from '../../errors.ts';

export interface LoginThrottleOptions {
  /** Attempts per account from one client IP in the window (default 5). */
  readonly perAccountIp?: number;
  /** Attempts per account from all addresses (default 20): slows a botnet guessing one password. */
  readonly perAccount?: number;
  /** Attempts per client IP over all accounts (default 50): slows password spraying. */
  readonly perIp?: number;
  /** Fixed window in ms (default 15 minutes). */
  readonly windowMs?: number;
}

/** One counted attempt; a successful login gives it back so that it never locks anyone out. */
export interface LoginAttempt {
  succeeded(): Promise<void>;
}

/**
 * Login attempts counted in PostgreSQL, so every control-plane replica shares them. An attempt is
 * counted (atomically: the address's counter, then the account's two) BEFORE the password is checked, so parallel
 * or batched guesses cannot all slip through before the first failure is recorded.
 */
export interface LoginThrottle {
  /** Counts one attempt for email + IP; throws `rate_limited` (without checking anything) past a limit. */
  begin(email: string, ip: string): Promise<LoginAttempt>;
  /** Drops counters whose window is over (the session sweeper calls it). */
  sweep(): Promise<number>;
}

const keysOf = (email: string, ip: string) => {
  const account = email.trim().toLowerCase();
  // Hashed: a mistyped password in the email field must not end up stored in clear.
  return { accountIp: `ai:${hashSecret(`${account}|${ip}`)}`, account: `a:${hashSecret(account)}`, ip: `i:${hashSecret(ip)}` };
};

export function createLoginThrottle(db: Db, opts: LoginThrottleOptions = {}): LoginThrottle {
  const windowS = (opts.windowMs ?? 15 * 60 * 1000) / 1000;
  const limits = { accountIp: opts.perAccountIp ?? 5, account: opts.perAccount ?? 20, ip: opts.perIp ?? 50 };
  const expired = sql<boolean>`auth_throttle.window_start <= now() - make_interval(secs => ${windowS})`;

  return {
    async begin(email, ip) {
      const keys = keysOf(email, ip);
      const limitOf = (key: string): number => (key === keys.accountIp ? limits.accountIp : key === keys.account ? limits.account : limits.ip);
      /** Counts one attempt on each key (atomically, one statement); throws past any key's limit. */
      const count = async (counted: readonly string[]): Promise<void> => {
        const rows = await db
          .insertInto('authThrottle')
          .values(counted.map((key) => ({ key, windowStart: sql<Date>`now()`, attempts: 1 })))
          .onConflict((oc) =>
            oc.column('key').doUpdateSet({
              attempts: sql<number>`case when ${expired} then 1 else auth_throttle.attempts + 1 end`,
              windowStart: sql<Date>`case when ${expired} then now() else auth_throttle.window_start end`,
            }),
          )
          .returning(['key', 'attempts', 'windowStart', sql<number>`extract(epoch from now())`.as('nowS')])
          .execute();
        for (const row of rows) {
          if (row.attempts > limitOf(row.key)) {
            const leftS = row.windowStart.getTime() / 1000 + windowS - Number(row.nowS);
            throw new ServiceError('rate_limited', `too many failed login attempts; try again in ${Math.max(1, Math.ceil(leftS / 60))} minute(s)`, null, {
              retryAfterS: leftS,
            });
          }
        }
      };
      // The address first, alone: an address past its limit is refused before any counter of the accounts it tries is
      // made (spraying random emails once added two rows per attempt, refused or not).
      await count([keys.ip]);
      await count([keys.accountIp, keys.account]);
      return {
        async succeeded() {
          await db
            .updateTable('authThrottle')
            .set({ attempts: sql<number>`greatest(attempts - 1, 0)` })
            .where('key', 'in', [keys.accountIp, keys.account, keys.ip])
            .execute();
        },
      };
    },
    async sweep() {
      const res = await db
        .deleteFrom('authThrottle')
        .where(sql<boolean>`window_start <= now() - make_interval(secs => ${windowS})`)
        .executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
