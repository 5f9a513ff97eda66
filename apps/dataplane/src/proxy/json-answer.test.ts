import { describe, expect, it } from 'vitest';
import { readJsonAnswer } from './json-answer.ts';

/** The bytes a body stands for (a binary body is one character per byte). */
const bytesOf = (a: { body: string; binary: boolean }): Buffer => Buffer.from(a.body, a.binary ? 'latin1' : 'utf8');

describe('json answer', () => {
  const answer = (model: string, content: string): Buffer =>
    Buffer.from(
      JSON.stringify({
        id: 'c1',
        object: 'chat.completion',
        model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
      }),
    );

  it('splices the model name into the runtime bytes, multi-byte names and content byte for byte', () => {
    const a = readJsonAnswer(answer('sérved-模型', 'héllo 🌍 "model":"sérved-模型"'), 'sérved-模型', 'ñame/Ünï')!;
    expect(a.binary).toBe(true); // the fast path: no decoding, no re-serialising
    const out = JSON.parse(bytesOf(a).toString('utf8')) as { model: string; choices: { message: { content: string } }[] };
    expect(out.model).toBe('ñame/Ünï');
    expect(out.choices[0]!.message.content).toBe('héllo 🌍 "model":"sérved-模型"'); // content is never rewritten
    expect(a.usage).toEqual({ prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 });
    expect(a.body.length).toBe(bytesOf(a).length); // a binary body's length is its Content-Length
  });

  it('parses unusual shapes whole, and answers null for what is not a JSON object', () => {
    const spaced = Buffer.from('{ "model": "s", "choices": [{"message": {"content": "abcdefgh"}}] }');
    const a = readJsonAnswer(spaced, 's', 'ñ')!;
    expect(a.binary).toBe(false);
    expect((JSON.parse(bytesOf(a).toString('utf8')) as { model: string }).model).toBe('ñ');
    expect(a.usage).toBeNull();
    expect(a.completionEstimate).toBe(2);
    expect(readJsonAnswer(Buffer.from('[1,2]'), 's', 'c')).toBeNull();
    // Without usage, tool calls and reasoning are estimated as generated text too.
    const message = {
      role: 'assistant',
      content: null,
      reasoning_content: 'r'.repeat(40),
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'fn', arguments: 'a'.repeat(398) } }],
    };
    const tools = readJsonAnswer(Buffer.from(JSON.stringify({ model: 's', choices: [{ index: 0, message }] })), 's', 'c')!;
    expect(tools.usage).toBeNull();
    expect(tools.completionEstimate).toBe(110);
    // The reasoning sent under both names is counted once.
    const twice = readJsonAnswer(
      Buffer.from(JSON.stringify({ model: 's', choices: [{ index: 0, message: { ...message, reasoning: 'r'.repeat(40) } }] })),
      's',
      'c',
    )!;
    expect(twice.completionEstimate).toBe(110);
    expect(readJsonAnswer(Buffer.from('{"usage":{"prompt_tokens":1'), 's', 'c')).toBeNull();
  });
});
