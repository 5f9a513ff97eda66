import { ApiError } from '@infer/shared';

/** Bounds of a hold: the default and any `x-scale-up-timeout` stay within [minMs, maxMs] (a client may go below minMs). */
export interface HoldBounds {
  readonly minMs: number;
  readonly maxMs: number;
}

export const SCALE_UP_TIMEOUT_HEADER = 'x-scale-up-timeout';

/** Default hold: twice the expected cold start (the longer of the stated Cold Start TTFT and the measured one), within the bounds (unknown: the lower bound). */
export function defaultHoldMs(coldStartSeconds: number | null, bounds: HoldBounds): number {
  const twice = coldStartSeconds === null || !(coldStartSeconds > 0) ? 0 : coldStartSeconds * 2000;
  return Math.min(bounds.maxMs, Math.max(bounds.minMs, twice));
}

/**
 * The hold deadline of one request, ms: the default, or `x-scale-up-timeout: <seconds>` (0 = do not wait;
 * shorter than the default is always allowed, longer only up to the upper bound). A malformed value is a 400.
 */
export function holdMs(header: string | string[] | undefined, coldStartSeconds: number | null, bounds: HoldBounds): number {
  const fallback = defaultHoldMs(coldStartSeconds, bounds);
  if (header === undefined) return fallback;
  const raw = (Array.isArray(header) ? (header[0] ?? '') : header).trim();
  // A non-negative decimal, exponent allowed (1e3); anything past the upper bound waits the bound.
  const seconds = /^\d+(\.\d+)?([eE][+-]?\d+)?$/.test(raw) ? Number(raw) : Number.NaN;
  if (Number.isNaN(seconds)) {
    throw new ApiError(
      'invalid_request',
      `The ${SCALE_UP_TIMEOUT_HEADER} header must be a number of seconds (0 or more; past ${bounds.maxMs / 1000} waits ${bounds.maxMs / 1000}), got '${raw.slice(0, 32)}'.`,
      SCALE_UP_TIMEOUT_HEADER,
    );
  }
  return Math.min(bounds.maxMs, Math.round(seconds * 1000));
}
