import { ServiceError } from '../../errors.ts';
import type { Principal } from '../access/principal.ts';

/**
 * Work per caller on tRPC and GraphQL, as a token bucket per principal (users by id, admin tokens
 * by the user who minted them, else by id; anonymous callers by IP): one caller's burst of costly
 * operations cannot stall the others, and minting tokens does not mint budget.
 * Per process: each control-plane replica grants its own budget, which bounds the load a caller
 * puts on any one replica (what stalls other users); it is not a quota.
 */
export interface PrincipalRateLimit {
  /** Takes `points` from the caller's bucket; throws `rate_limited` when it has not enough. */
  take(principal: Principal, ip: string, points?: number): void;
}

export interface PrincipalRateLimitOptions {
  /** Points refilled per minute, and the bucket size (default 1200: 20 simple calls a second). */
  readonly pointsPerMinute?: number;
  /** Buckets kept at most; the least recently used go first (default 10,000). */
  readonly maxKeys?: number;
  readonly now?: () => number;
}

export const principalKey = (p: Principal, ip: string): string =>
  p.kind === 'user' ? `u:${p.userId}` : p.kind === 'admin_token' ? (p.userId !== null ? `u:${p.userId}` : `t:${p.tokenId}`) : `ip:${ip}`;

export function createPrincipalRateLimit(opts: PrincipalRateLimitOptions = {}): PrincipalRateLimit {
  const capacity = opts.pointsPerMinute ?? 1200;
  const perMs = capacity / 60_000;
  const maxKeys = opts.maxKeys ?? 10_000;
  const now = opts.now ?? Date.now;
  const buckets = new Map<string, { points: number; at: number }>();
  return {
    take(principal, ip, points = 1) {
      const key = principalKey(principal, ip);
      const t = now();
      const b = buckets.get(key) ?? { points: capacity, at: t };
      b.points = Math.min(capacity, b.points + (t - b.at) * perMs);
      b.at = t;
      buckets.delete(key);
      buckets.set(key, b);
      while (buckets.size > maxKeys) {
        const oldest = buckets.keys().next().value;
        if (oldest === undefined) break;
        buckets.delete(oldest);
      }
      if (b.points < points) {
        const waitS = Math.max(1, Math.ceil((points - b.points) / perMs / 1000));
        throw new ServiceError('rate_limited', `too many requests from this caller; retry in ${waitS} s`, null, { retryAfterS: waitS });
      }
      b.points -= points;
    },
  };
}

/**
 * Points one database aggregate costs a caller (a tenant's usage over up to a year: seconds of database time, where
 * an ordinary call costs one point): the default budget of 1,200 a minute then allows 24 a minute.
 */
export const AGGREGATE_POINTS = 50;
