import type { RateDecision } from './rate-limiter.ts';

/** A duration the way OpenAI writes it in `x-ratelimit-reset-*`: `20ms`, `6s`, `8.64s`, `1m0s`. */
export function formatDuration(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1000) return `${whole}ms`;
  const hours = Math.floor(whole / 3_600_000);
  const minutes = Math.floor((whole % 3_600_000) / 60_000);
  const secondsMs = whole % 60_000;
  const seconds = secondsMs % 1000 === 0 ? String(secondsMs / 1000) : String(Number((secondsMs / 1000).toFixed(3)));
  if (hours > 0) return `${hours}h${minutes}m${seconds}s`;
  if (minutes > 0) return `${minutes}m${seconds}s`;
  return `${seconds}s`;
}

/** `retry-after` in whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number): string => String(Math.max(1, Math.ceil(ms / 1000)));

/** The `x-ratelimit-*` headers of a decision: the requests trio and/or the tokens trio, for the limits that apply. */
export function rateLimitHeaders(d: RateDecision): Record<string, string> {
  const h: Record<string, string> = {};
  if (d.rpmLimit !== null) {
    h['x-ratelimit-limit-requests'] = String(d.rpmLimit);
    h['x-ratelimit-remaining-requests'] = String(Math.max(0, d.rpmLimit - d.requestsUsed));
    h['x-ratelimit-reset-requests'] = formatDuration(d.resetRequestsMs);
  }
  if (d.tpmLimit !== null) {
    h['x-ratelimit-limit-tokens'] = String(d.tpmLimit);
    h['x-ratelimit-remaining-tokens'] = String(Math.max(0, d.tpmLimit - d.tokensUsed));
    h['x-ratelimit-reset-tokens'] = formatDuration(d.resetTokensMs);
  }
  return h;
}
