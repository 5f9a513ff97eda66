import { describe, expect, it } from 'vitest';
import { countPromptTokens, countTokens, MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS } from './tokenizer.ts';

describe('countTokens', () => {
  it('charges one token per started 4 word characters and one per other symbol', () => {
    expect(countTokens('')).toBe(0);
    expect(countTokens('   ')).toBe(0);
    expect(countTokens('hi')).toBe(1);
    expect(countTokens('four')).toBe(1);
    expect(countTokens('fives')).toBe(2);
    expect(countTokens('hello, world!')).toBe(2 + 1 + 2 + 1);
    expect(countTokens('日本')).toBe(2);
  });
  it('counts prompts as contents plus per-message overhead, including text parts', () => {
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image_url' }] },
    ];
    expect(countPromptTokens(messages)).toBe(REPLY_PRIMING_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS + 3 + 1);
  });
});
