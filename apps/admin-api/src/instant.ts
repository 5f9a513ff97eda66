import { ServiceError } from './errors.ts';

/**
 * Whether a date is one the API takes and gives back: years 0001 to 9999 in UTC, what PostgreSQL stores without error
 * and the DateTime scalar writes as it reads (an offset can move a date written in range out of it).
 */
export function inApiYears(d: Date): boolean {
  const year = d.getUTCFullYear();
  return Number.isFinite(d.getTime()) && year >= 1 && year <= 9999;
}

/** Refuses a date outside `inApiYears`, naming `param`. */
export function checkApiInstant(d: Date, param: string): void {
  if (!inApiYears(d)) throw new ServiceError('invalid', `${param} must be a date of the years 0001 to 9999 (UTC)`, param);
}
