import { describe, expect, it } from 'vitest';
import { adapterFor } from '../runtimes/runtime-registry.ts';
import { createSseRewriter } from './sse-rewriter.ts';
import { errorEventFor } from './upstream-errors.ts';

/** The bytes an output stands for (a string is binary: written as latin1). */
const bytes = (o: Buffer | string): Buffer => (typeof o === 'string' ? Buffer.from(o, 'latin1') : o);

const run = (
  chunks: string[],
  opts: { from: string; to: string; dropUsageChunk: boolean; errorEvent?: (json: string, from: string, to: string) => string },
) => {
  const rw = createSseRewriter(opts);
  let out = '';
  for (const c of chunks) {
    const o = rw.push(Buffer.from(c));
    if (o !== null) out += bytes(o).toString();
  }
  const tail = rw.end();
  if (tail !== null) out += bytes(tail).toString();
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

  it('a 4 MiB line in 1 KiB chunks comes through whole, rewritten, with its usage read (joined once, not per chunk)', () => {
    const content = 'x'.repeat(4 << 20);
    const line = `data: {"model":"served","choices":[{"delta":{"content":"${content}"}}],"usage":{"prompt_tokens":4,"completion_tokens":9,"total_tokens":13}}\n\n`;
    const chunks: string[] = [];
    for (let i = 0; i < line.length; i += 1024) chunks.push(line.slice(i, i + 1024));
    const { out, rw } = run([...chunks, 'data: [DONE]\n\n'], { from: 'served', to: 'n', dropUsageChunk: false });
    expect(out).toBe(`${line.replace('"model":"served"', '"model":"n"')}data: [DONE]\n\n`);
    expect(rw.usage).toEqual({ prompt_tokens: 4, completion_tokens: 9, total_tokens: 13 });
    expect(rw.sawDone).toBe(true);
    // And a stream that ends inside such a line hands back what it had.
    const cut = run(chunks.slice(0, 3), { from: 'served', to: 'n', dropUsageChunk: false });
    expect(cut.out).toBe(chunks.slice(0, 3).join('').replace('"model":"served"', '"model":"n"'));
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
      expect(Buffer.concat(parts.map(bytes)).toString()).toBe(expected);
      expect(rw.contentChunks).toBe(1); // the empty content is not a token
      expect(rw.sawDone).toBe(true);
    }
  });

  it('counts chunks of tool-call arguments and of reasoning as generated tokens, never an empty one', () => {
    const chunk = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ model: 'served', choices: [{ index: 0, delta }] })}\n\n`;
    const call = (args: string) => chunk({ tool_calls: [{ index: 0, function: { arguments: args } }] });
    const { rw } = run(
      [
        chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '' } }] }),
        call('{"a":'),
        call('"x"}'),
        chunk({ reasoning_content: 'think' }),
        chunk({ reasoning: 'more' }),
        chunk({ reasoning_content: '' }),
        chunk({ content: 'done' }),
        // One token, however many names it comes under (a runtime may send the reasoning under both).
        chunk({ reasoning_content: 'same', reasoning: 'same' }),
        chunk({ content: 'x', reasoning_content: 'y' }),
      ],
      { from: 'served', to: 'n', dropUsageChunk: true },
    );
    expect(rw.contentChunks).toBe(7);
  });

  it('reads usage with nested details, and keeps a usage event that still has choices', () => {
    const nested =
      'data: {"model":"served","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":4},"note":"a}b"}}\n\n';
    const a = run([nested, 'data: [DONE]\n\n'], { from: 'served', to: 'n', dropUsageChunk: true });
    expect(a.rw.usage).toEqual({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 });
    expect(a.out).toBe('data: [DONE]\n\n');
    const withChoice = 'data: {"model":"served","choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}\n\n';
    const b = run([withChoice], { from: 'served', to: 'n', dropUsageChunk: true });
    expect(b.rw.usage?.completion_tokens).toBe(1);
    expect(b.out).toBe(withChoice.replace('"model":"served"', '"model":"n"'));
    const escaped = 'data: {"choices":[ ],"usage":{"prompt_tokens":5,"completion_tokens":6,"x":"q\\"}"}}\n\n';
    const c = run([escaped], { from: 'a', to: 'a', dropUsageChunk: true });
    expect(c.rw.usage?.completion_tokens).toBe(6);
    expect(c.out).toBe('');
  });

  it('finds a multi-byte served name by its bytes and writes the new one as bytes', () => {
    const { out } = run(['data: {"model":"sérved-模型","choices":[{"delta":{"content":"é"}}]}\n\n'], { from: 'sérved-模型', to: 'ñ/Ü', dropUsageChunk: true });
    expect(out).toBe('data: {"model":"ñ/Ü","choices":[{"delta":{"content":"é"}}]}\n\n');
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

  it("rewrites a runtime's error event to the OpenAI error body, across splits, and nothing else", () => {
    const errorEvent = errorEventFor(adapterFor('vllm'));
    const head = 'data: {"model":"served","choices":[{"delta":{"content":"\\"error\\": no"}}]}\n\n';
    const vllm =
      'data: {"error": {"object": "error", "message": "served: max_tokens too large", "type": "BadRequestError", "param": "max_tokens", "code": 400}}\n\n';
    const tgi = 'data:{"error":"CUDA out of memory","error_type":"generation"}\n\n';
    const text = head + vllm + tgi + 'data: [DONE]\n\n';
    for (const cut of [1, 40, head.length + 7, head.length + 30, head.length + vllm.length + 3]) {
      const { out } = run([text.slice(0, cut), text.slice(cut)], { from: 'served', to: 'acme/M', dropUsageChunk: true, errorEvent });
      const lines = out.split('\n').filter((l) => l !== '');
      // Content that mentions "error" (escaped quotes) is content; the model is rewritten as before.
      expect(lines[0]).toBe('data: {"model":"acme/M","choices":[{"delta":{"content":"\\"error\\": no"}}]}');
      // A 400 from the runtime keeps its message (with the client's model name) and its field; codes are strings.
      expect(JSON.parse(lines[1]!.slice(6))).toEqual({
        error: { message: 'acme/M: max_tokens too large', type: 'invalid_request_error', param: 'max_tokens', code: 'invalid_request' },
      });
      // Anything else is the runtime's fault: the generic 502 body, its own text not passed on.
      expect(JSON.parse(lines[2]!.slice(6))).toEqual({
        error: { message: 'The model runtime failed to answer.', type: 'api_error', param: null, code: 'upstream_error' },
      });
      expect(lines[3]).toBe('data: [DONE]');
    }
    // Without the option, relayed as it came.
    expect(run([vllm], { from: 'served', to: 'served', dropUsageChunk: true }).out).toBe(vllm);
  });

  it('an "error" key inside an ordinary chunk does not stop its model and usage being rewritten', () => {
    const errorEvent = errorEventFor(adapterFor('vllm'));
    const chunk = 'data: {"error":null,"model":"served","choices":[{"delta":{"content":"a"}}]}\n\n';
    const usage = 'data: {"error":null,"model":"served","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}\n\n';
    const { out, rw } = run([chunk + usage + 'data: [DONE]\n\n'], { from: 'served', to: 'acme/M', dropUsageChunk: true, errorEvent });
    expect(out).toBe('data: {"error":null,"model":"acme/M","choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n');
    expect(rw.usage?.prompt_tokens).toBe(4);
  });

  it("TGI's in-stream error_type maps as TGI's HTTP answers do: validation is the caller's 400, overloaded a 429", () => {
    const tgi = errorEventFor(adapterFor('tgi'));
    expect(JSON.parse(tgi('{"error":"Input validation error: `top_p` must be > 0.0 and < 1.0","error_type":"validation"}', 'served', 'acme/M'))).toEqual({
      error: { message: 'Input validation error: `top_p` must be > 0.0 and < 1.0', type: 'invalid_request_error', param: null, code: 'invalid_request' },
    });
    expect(JSON.parse(tgi('{"error":"Model is overloaded","error_type":"overloaded"}', 'served', 'acme/M')).error.code).toBe('rate_limit_exceeded');
    expect(JSON.parse(tgi('{"error":"CUDA out of memory","error_type":"generation"}', 'served', 'acme/M')).error.code).toBe('upstream_error');
  });
});
