import { describe, expect, it } from 'vitest';
import { isoTime } from './iso-time.ts';

describe('isoTime', () => {
  it('is Date.toISOString for whole milliseconds, within a second and across seconds, days and years', () => {
    const base = Date.UTC(2026, 11, 31, 23, 59, 58, 990);
    for (let ms = base; ms < base + 2_100; ms += 7) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    for (const ms of [0, 1, 9, 10, 99, 100, 999, 1000, -1, -1001, 253402300799999, Date.now()]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
  });

  it('falls back to Date for a fraction of a millisecond or a year past 9999', () => {
    for (const ms of [1_700_000_000_000.5, 253402300800000, -62198755200001]) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    // And the cached second is still right after a fallback.
    expect(isoTime(1_700_000_000_123)).toBe(new Date(1_700_000_000_123).toISOString());
  });
});
