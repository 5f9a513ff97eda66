import { describe, expect, it } from 'vitest';
import { labelKeyJoiner } from './metrics.ts';

describe('label key joiner', () => {
  it('reuses the last key only for the very same values, whatever order calls come in', () => {
    const key = labelKeyJoiner();
    const a = key('chat', 'shared', 'm', 200);
    expect(a).toBe('chat\u0000shared\u0000m\u0000200');
    expect(key('chat', 'shared', 'm', 200)).toBe(a);
    expect(key('chat', 'shared', 'm', 429)).toBe('chat\u0000shared\u0000m\u0000429');
    expect(key('chat', 'shared', 'n', 429)).toBe('chat\u0000shared\u0000n\u0000429');
    expect(key('chat', 'shared', 'm', 200)).toBe(a);
    expect(key('shared', 'm')).toBe('shared\u0000m');
    expect(key('shared', 'm', '')).toBe('shared\u0000m\u0000');
  });
});
