import { ServiceError } from '../../errors.ts';

export interface LoginThrottleOptions {
  /** Failed attempts allowed per key in the window (default 5). */
  readonly maxFailures?: number;
  /** Window in ms (default 15 minutes). */
  readonly windowMs?: number;
  /** Keys tracked at most; the oldest are dropped beyond (default 10,000). */
  readonly maxKeys?: number;
  readonly now?: () => number;
}

/** In-memory failed-login counter per email + client IP (one process; enough for a console). */
export interface LoginThrottle {
  /** Throws `rate_limited` while the key has used up its failures. */
  check(key: string): void;
  recordFailure(key: string): void;
  /** A successful login clears the key's failures. */
  reset(key: string): void;
}

export const throttleKey = (email: string, ip: string): string => `${email.trim().toLowerCase()}|${ip}`;

export function createLoginThrottle(opts: LoginThrottleOptions = {}): LoginThrottle {
  const maxFailures = opts.maxFailures ?? 5;
  const windowMs = opts.windowMs ?? 15 * 60 * 1000;
  const maxKeys = opts.maxKeys ?? 10_000;
  const now = opts.now ?? Date.now;
  // key -> failure times, oldest first; Map order doubles as LRU for eviction.
  const failures = new Map<string, number[]>();

  const recent = (key: string): number[] => {
    const cutoff = now() - windowMs;
    const list = (failures.get(key) ?? []).filter((t) => t > cutoff);
    if (list.length === 0) failures.delete(key);
    else failures.set(key, list);
    return list;
  };

  return {
    check(key) {
      const list = recent(key);
      if (list.length >= maxFailures) {
        const retryS = Math.max(1, Math.ceil(((list[0] ?? now()) + windowMs - now()) / 1000));
        throw new ServiceError('rate_limited', `too many failed login attempts; try again in ${Math.ceil(retryS / 60)} minute(s)`);
      }
    },
    recordFailure(key) {
      const list = recent(key);
      list.push(now());
      failures.delete(key);
      failures.set(key, list);
      while (failures.size > maxKeys) {
        const oldest = failures.keys().next().value;
        if (oldest === undefined) break;
        failures.delete(oldest);
      }
    },
    reset(key) {
      failures.delete(key);
    },
  };
}
