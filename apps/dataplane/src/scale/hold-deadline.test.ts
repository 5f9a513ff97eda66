import { ApiError } from '@infer/shared';
import { describe, expect, it } from 'vitest';
import { defaultHoldMs, holdMs } from './hold-deadline.ts';

const bounds = { minMs: 30_000, maxMs: 600_000 };

describe('hold deadline', () => {
  it('defaults to twice the Cold Start TTFT within [30 s, 600 s]', () => {
    expect(defaultHoldMs(60, bounds)).toBe(120_000);
    expect(defaultHoldMs(5, bounds)).toBe(30_000);
    expect(defaultHoldMs(900, bounds)).toBe(600_000);
    expect(defaultHoldMs(null, bounds)).toBe(30_000);
  });

  it('x-scale-up-timeout shortens to anything (0 included) and lengthens only up to the upper bound', () => {
    expect(holdMs(undefined, 60, bounds)).toBe(120_000);
    expect(holdMs('0', 60, bounds)).toBe(0);
    expect(holdMs('2.5', 60, bounds)).toBe(2500);
    expect(holdMs(' 300 ', 60, bounds)).toBe(300_000);
    expect(holdMs('3600', 60, bounds)).toBe(600_000);
    expect(holdMs(['4', '9'], 60, bounds)).toBe(4000);
    expect(holdMs('1e3', 60, bounds)).toBe(600_000);
    expect(holdMs('2.5E1', 60, bounds)).toBe(25_000);
    expect(holdMs('1e999', 60, bounds)).toBe(600_000);
  });

  it('a malformed value is a 400 naming the header', () => {
    for (const bad of ['', 'soon', '-1', '1e', 'NaN', '5s', 'Infinity', '0x10']) {
      let err: unknown = null;
      try {
        holdMs(bad, 60, bounds);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(400);
      expect((err as ApiError).param).toBe('x-scale-up-timeout');
    }
  });
});
