import { describe, expect, it } from 'vitest';
import { createSseRewriter } from './sse-rewriter.ts';

const run = (chunks: string[], opts: { from: string; to: string; dropUsageChunk: boolean }) => {
  const rw = createSseRewriter(opts);
  let out = '';
  for (const c of chunks) {
    const o = rw.push(Buffer.from(c));
    if (o !== null) out += o.toString();
  }
  const tail = rw.end();
  if (tail !== null) out += tail.toString();
  return { out, rw };
};

const usageLine = 'data: {"model":"served","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}\n\n';

describe('sse rewriter', () => {
  it('rewrites compact and spaced model fields, never content', () => {
    const { out } = run(['data: {"model":"served","choices":[{"delta":{"content":"\\"model\\":\\"served\\""}}]}\n\n', 'data: {"model": "served"}\n\n'], {
      from: 'served',
      to: 'a/b',
      dropUsageChunk: false,
    });
    expect(out).toBe('data: {"model":"a/b","choices":[{"delta":{"content":"\\"model\\":\\"served\\""}}]}\n\ndata: {"model": "a/b"}\n\n');
  });

  it('reads usage and drops the usage-only event when unwanted', () => {
    const { out, rw } = run(['data: {"model":"served","choices":[{"delta":{}}]}\n\n', usageLine, 'data: [DONE]\n\n'], {
      from: 'served',
      to: 'n',
      dropUsageChunk: true,
    });
    expect(rw.usage).toEqual({ prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 });
    expect(out).toBe('data: {"model":"n","choices":[{"delta":{}}]}\n\ndata: [DONE]\n\n');
    expect(rw.sawDone).toBe(true);
  });

  it('keeps the usage event when asked, across arbitrary splits', () => {
    const whole = `${usageLine}data: [DONE]\n\n`;
    for (let cut = 1; cut < whole.length; cut += 7) {
      const { out, rw } = run([whole.slice(0, cut), whole.slice(cut)], { from: 'served', to: 'served', dropUsageChunk: false });
      expect(out).toBe(whole);
      expect(rw.usage?.completion_tokens).toBe(2);
    }
  });

  it('does not take [DONE] inside content for the end', () => {
    const { rw } = run(['data: {"choices":[{"delta":{"content":"data: [DONE]"}}]}\n\n'], { from: 'a', to: 'a', dropUsageChunk: true });
    expect(rw.sawDone).toBe(false);
  });

  it('passes multi-byte text through byte for byte, however the bytes are split', () => {
    const whole = Buffer.from(
      'data: {"model":"served","choices":[{"delta":{"content":"héllo 🌍 ✓"}}]}\n\ndata: {"model":"served","choices":[{"delta":{"content":""}}]}\n\ndata: [DONE]\n\n',
    );
    const expected = whole.toString().replaceAll('"model":"served"', '"model":"ñame"');
    for (let cut = 1; cut < whole.length; cut++) {
      const rw = createSseRewriter({ from: 'served', to: 'ñame', dropUsageChunk: true });
      const parts = [rw.push(whole.subarray(0, cut)), rw.push(whole.subarray(cut)), rw.end()].filter((b) => b !== null);
      expect(Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))).toString()).toBe(expected);
      expect(rw.contentChunks).toBe(1); // the empty content is not a token
      expect(rw.sawDone).toBe(true);
    }
  });

  it('drops the usage event together with the model inside it, keeping the events around it', () => {
    const { out, rw } = run([`data: {"model":"served","choices":[{"delta":{"content":"a"}}]}\n\n${usageLine}data: {"model": "served","choices":[]}\n\n`], {
      from: 'served',
      to: 'x',
      dropUsageChunk: true,
    });
    expect(out).toBe('data: {"model":"x","choices":[{"delta":{"content":"a"}}]}\n\ndata: {"model": "x","choices":[]}\n\n');
    expect(rw.usage?.prompt_tokens).toBe(4);
  });
});
