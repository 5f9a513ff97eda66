import { describe, expect, it } from 'vitest';
import { countPromptTokens } from '../usage/prompt-tokens.ts';
import { estimatePromptTokens, weightedLength } from './token-budget.ts';

const body = (content: string): Record<string, unknown> => ({ model: 'llama', messages: [{ role: 'user', content }] });

describe('prompt token estimate', () => {
  it('is characters / 4 for Latin text, plus the template overheads', () => {
    expect(estimatePromptTokens(body('a'.repeat(400)))).toBe(100 + 4 + 3);
    expect(weightedLength('hello world')).toBe(11);
  });

  it('counts a CJK, kana or Hangul character as a token, within the real tokenizer of a CJK prompt', () => {
    const zh = '机器学习是人工智能的一个分支，它使计算机能够从数据中学习。'.repeat(20);
    const ja = 'これは日本語の文章です。トークンの数を数えます。'.repeat(20);
    const ko = '한국어 문장입니다 토큰 수를 셉니다'.repeat(20);
    for (const text of [zh, ja, ko]) {
      const estimate = estimatePromptTokens(body(text));
      const real = countPromptTokens(body(text));
      // A quarter per character would be under half the real count; the estimate stays within it.
      expect(estimate).toBeGreaterThan(real * 0.6);
      expect(estimate).toBeLessThan(real * 1.4);
    }
  });

  it('counts what the template renders besides messages: offered tools and earlier tool calls, in the estimate and the count alike', () => {
    const doc = 'The quarterly report says revenue grew in every region. '.repeat(200);
    const plain = body('Do what the tool says.');
    const withTools = {
      ...plain,
      tools: [{ type: 'function', function: { name: 'answer', description: doc, parameters: { type: 'object', properties: {} } } }],
    };
    const toolCall = { id: 'c1', type: 'function', function: { name: 'answer', arguments: JSON.stringify({ text: doc }) } };
    const withCalls = { ...plain, messages: [...(plain['messages'] as unknown[]), { role: 'assistant', content: null, tool_calls: [toolCall] }] };
    for (const b of [withTools, withCalls]) {
      // About 2,600 tokens of text beyond the messages' content.
      expect(estimatePromptTokens(b) - estimatePromptTokens(plain)).toBeGreaterThan(2500);
      expect(countPromptTokens(b) - countPromptTokens(plain)).toBeGreaterThan(2000);
    }
  });
});
