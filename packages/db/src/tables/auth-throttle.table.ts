import type { Selectable } from 'kysely';
import type { Timestamp } from './column-types.ts';

export interface AuthThrottleTable {
  /** `<kind>:<sha256 hex>` of the account, the client IP or both; never the email or IP itself. */
  key: string;
  /** Start of the current fixed window (database clock, so replicas agree). */
  windowStart: Timestamp;
  /** Login attempts counted in the window (a successful one is given back). */
  attempts: number;
}

export type AuthThrottleRow = Selectable<AuthThrottleTable>;
