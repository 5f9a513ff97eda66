import { describe, expect, it } from 'vitest';
import { ChatBody } from './chat-body.ts';

describe('ChatBody', () => {
  const text = '{"model":"m","messages":[{"role":"user","content":"é 日本"}],"stream":true}';

  it('drops the parsed form only when bytes can stand for it, and parses them again on demand', () => {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const withBytes = new ChatBody(parsed, Buffer.from(text));
    expect(withBytes.value).toBe(parsed);
    withBytes.release();
    const again = withBytes.value;
    expect(again).not.toBe(parsed);
    expect(again).toEqual(JSON.parse(text));
    // Parsed once after a release, then kept.
    expect(withBytes.value).toBe(again);

    const coerced = { model: 'm', messages: [], max_tokens: 16 };
    const withoutBytes = new ChatBody(coerced, undefined);
    withoutBytes.release();
    expect(withoutBytes.value).toBe(coerced);
  });
});
