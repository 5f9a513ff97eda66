import { describe, expect, it } from 'vitest';
import { generateCompletion, promptSeed } from './generate-text.ts';
import { countTokens } from './tokenizer.ts';

describe('generateCompletion', () => {
  it('produces text whose token count equals the number of pieces', () => {
    for (let seed = 0; seed < 200; seed++) {
      const c = generateCompletion({ seed, maxTokens: null, limit: 1000, stop: [] });
      expect(c.pieces.join('')).toBe(c.text);
      expect(countTokens(c.text)).toBe(c.pieces.length);
      expect(c.pieces.length).toBeGreaterThanOrEqual(16);
      expect(c.pieces.length).toBeLessThanOrEqual(64);
      expect(c.finishReason).toBe('stop');
    }
  });
  it('caps a natural length at the context limit with finish_reason length', () => {
    const c = generateCompletion({ seed: 1, maxTokens: null, limit: 3, stop: [] });
    expect(c.pieces).toHaveLength(3);
    expect(c.finishReason).toBe('length');
  });
  it('cuts inside a piece when a stop string starts mid-token', () => {
    const full = generateCompletion({ seed: 5, maxTokens: 30, limit: 1000, stop: [] });
    const at = full.text.length - 3;
    const stop = full.text.slice(at, at + 2);
    const cut = generateCompletion({ seed: 5, maxTokens: 30, limit: 1000, stop: [stop] });
    expect(cut.text).toBe(full.text.slice(0, full.text.indexOf(stop)));
    expect(cut.pieces.join('')).toBe(cut.text);
    expect(cut.finishReason).toBe('stop');
  });
  it('seeds from the prompt, mixed with the request seed', () => {
    const m = [{ role: 'user', content: 'a' }];
    expect(promptSeed(m, null)).toBe(promptSeed([{ role: 'user', content: 'a' }], null));
    expect(promptSeed(m, null)).not.toBe(promptSeed([{ role: 'user', content: 'b' }], null));
    expect(promptSeed(m, 1)).not.toBe(promptSeed(m, 2));
  });
});
