import { ServiceError } from '../../errors.ts';

/** Above this a limit means nothing and no longer fits the integer columns. */
export const MAX_RATE_LIMIT = 1_000_000_000;

/**
 * Rate limits of tenants and keys: whole numbers from 1 to MAX_RATE_LIMIT, or null for "no limit".
 * Both transports reach this through the services, so a bad value names its field the same way.
 */
export function checkRateLimits(limits: { readonly rpmLimit?: number | null; readonly tpmLimit?: number | null }): void {
  for (const field of ['rpmLimit', 'tpmLimit'] as const) {
    const v = limits[field];
    if (v != null && (!Number.isSafeInteger(v) || v < 1 || v > MAX_RATE_LIMIT)) {
      throw new ServiceError('invalid', `${field} must be a whole number from 1 to ${MAX_RATE_LIMIT}, or null for no limit`, field);
    }
  }
}
