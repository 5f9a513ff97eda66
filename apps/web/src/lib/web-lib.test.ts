import { describe, expect, it } from 'vitest';
import { chunkText, readSse, StreamError } from './sse.ts';
import { curlSnippet, KEY_PLACEHOLDER, nodeSnippet, pythonSnippet, requestBody, shellQuote } from '@infer/shared/snippets';
import { parseColdStart, parseConcurrency, parseCount, parseList, parseParameterSize, parsePrice } from './spec-forms.ts';

describe('spec string forms', () => {
  it('accepts the spec forms and empty', () => {
    expect(parseParameterSize('70B')).toEqual({ value: 70, error: null });
    expect(parseParameterSize('1.5B').value).toBe(1.5);
    expect(parseConcurrency('2x').value).toBe(2);
    expect(parseColdStart('5 sec').value).toBe(5);
    expect(parseParameterSize('  ')).toEqual({ value: null, error: null });
    expect(parseCount('131072', 'Context Length').value).toBe(131072);
    expect(parsePrice('$0.60', 'p').value).toBe(0.6);
    expect(parseList(' Chat, , Coding ')).toEqual(['Chat', 'Coding']);
  });
  it('rejects other forms with a message naming the expected one', () => {
    expect(parseParameterSize('70').error).toContain('"70B"');
    expect(parseParameterSize('70 billion').error).not.toBeNull();
    expect(parseConcurrency('two').error).toContain('"2x"');
    expect(parseColdStart('5s').error).toContain('"5 sec"');
    expect(parseCount('1.5', 'GPU Count').error).toContain('GPU Count');
  });
});

describe('snippets', () => {
  const input = { baseUrl: 'http://localhost:8080/endpoints/v1/', model: "Llama's", apiKey: null };
  it('shows the placeholder until a key is given', () => {
    expect(curlSnippet(input)).toContain(`Bearer ${KEY_PLACEHOLDER}`);
    expect(pythonSnippet(input)).toContain(`api_key="${KEY_PLACEHOLDER}"`);
    expect(nodeSnippet({ ...input, apiKey: 'infk_x' })).toContain('apiKey: "infk_x"');
  });
  it('quotes for the shell and targets <base>/chat/completions', () => {
    const curl = curlSnippet(input);
    expect(curl).toContain(`'http://localhost:8080/endpoints/v1/chat/completions'`);
    expect(curl).toContain(`Llama'\\''s`);
    expect(shellQuote("a'b")).toBe(`'a'\\''b'`);
  });
  it('leaves model out when null (dedicated allows it)', () => {
    expect(requestBody({ ...input, model: null })).not.toHaveProperty('model');
    expect(requestBody({ ...input, stream: true, temperature: 0.2 })).toMatchObject({ stream: true, temperature: 0.2, max_tokens: 128 });
  });
});

describe('SSE reader', () => {
  it('yields JSON events split across chunks and stops at [DONE]', async () => {
    const parts = [
      'data: {"choices":[{"delta":{"content":"Hel"}}]}\n',
      '\ndata: {"choices":[{"delta":{"content":"lo"}}]}\r\n\r\n',
      'data: [DONE]\n\ndata: {"x":1}\n\n',
    ];
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of parts) c.enqueue(new TextEncoder().encode(p));
        c.close();
      },
    });
    let text = '';
    for await (const e of readSse(body)) text += chunkText(e);
    expect(text).toBe('Hello');
  });
});

/** A ReadableStream of the given text parts. */
function streamOf(parts: readonly string[]): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of parts) c.enqueue(new TextEncoder().encode(p));
      c.close();
    },
  });
}

/** The text a stream yields before it ends, and the error it ends with (null: it finished). */
async function readAll(parts: readonly string[]): Promise<{ text: string; error: unknown }> {
  let text = '';
  try {
    for await (const e of readSse(streamOf(parts))) text += chunkText(e);
    return { text, error: null };
  } catch (error) {
    return { text, error };
  }
}

describe('SSE stream failures', () => {
  const chunk = 'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n';
  it('throws the message of an OpenAI-shaped error event, after the text before it', async () => {
    const { text, error } = await readAll([
      chunk,
      'data: {"error":{"message":"The model runtime failed to answer.","type":"server_error"}}\n\ndata: [DONE]\n\n',
    ]);
    expect(text).toBe('Hi');
    expect(error).toBeInstanceOf(StreamError);
    expect((error as Error).message).toBe('The model runtime failed to answer.');
  });
  it('throws on an `event: error` and on a stream cut before [DONE]', async () => {
    expect(((await readAll([chunk, 'event: error\ndata: {"message":"overloaded"}\n\n'])).error as Error).message).toBe('{"message":"overloaded"}');
    const cut = await readAll([chunk]);
    expect(cut.text).toBe('Hi');
    expect(cut.error).toBeInstanceOf(StreamError);
    expect((cut.error as Error).message).toMatch(/ended before it was complete/);
  });
  it('finishes on a last [DONE] without its blank line', async () => {
    expect(await readAll([chunk, 'data: [DONE]\n'])).toEqual({ text: 'Hi', error: null });
  });
});

describe('where login leads', () => {
  it('follows paths of this site', async () => {
    const { safeNext } = await import('./safe-next.ts');
    expect(safeNext('/usage')).toBe('/usage');
    expect(safeNext('/playground?endpoint=Llama%203&mode=shared')).toBe('/playground?endpoint=Llama%203&mode=shared');
  });
  it('refuses other sites in any spelling, and nothing', async () => {
    const { safeNext } = await import('./safe-next.ts');
    for (const bad of [
      '/\\evil.com',
      '/\\/evil.com',
      '\\\\evil.com',
      '//evil.com',
      '///evil.com',
      'https://evil.com/',
      'javascript:alert(1)',
      '/\t/evil.com',
      '/\n/evil.com',
      'evil.com',
      '',
      null,
    ]) {
      expect(safeNext(bad), String(bad)).toBe('/');
    }
  });
});

describe('console display rules', () => {
  it('shows money one way on every page: cents at least, finer digits where the amount has them', async () => {
    const { formatGpuHourPrice, formatTokenPrice, formatUsd } = await import('./format.ts');
    expect(formatUsd(0)).toBe('$0.00');
    expect(formatUsd(2.5)).toBe('$2.50');
    expect(formatUsd(2.125)).toBe('$2.125');
    expect(formatUsd(17)).toBe('$17.00');
    expect(formatUsd(1234.5)).toBe('$1,234.50');
    expect(formatUsd(0.0000072)).toBe('$0.000007');
    expect(formatUsd(0.0000001)).toBe('<$0.000001');
    expect(formatGpuHourPrice(2.125)).toBe('$2.125 per GPU-hour');
    expect(formatGpuHourPrice(null)).toBe('');
    expect(formatTokenPrice(0.125, 0.6)).toBe('$0.125 / $0.60 per 1M tokens (input / output)');
    expect(formatTokenPrice(null, null)).toBe('');
  });
  it('sorts names case-insensitively', async () => {
    const { sortByName } = await import('./sort.ts');
    const names = ['Qwen2.5', 'gemma-3', 'DeepSeek-V3', 'gpt-oss', 'Llama-3', 'Phi-4', 'deepseek-r1'];
    expect(sortByName(names.map((name) => ({ name }))).map((e) => e.name)).toEqual([
      'deepseek-r1',
      'DeepSeek-V3',
      'gemma-3',
      'gpt-oss',
      'Llama-3',
      'Phi-4',
      'Qwen2.5',
    ]);
  });
  it('turns a raw validation error into words', async () => {
    const { issuesText } = await import('./error-text.ts');
    const raw = JSON.stringify([{ code: 'too_big', maximum: 200, path: ['search'], message: 'Too big: expected string to have <=200 characters' }], null, 2);
    expect(issuesText(raw)).toBe('search: Too big: expected string to have <=200 characters');
    expect(issuesText('email or password is incorrect')).toBeNull();
    expect(issuesText('[not json')).toBeNull();
  });
  it('tells console users to log in, not to send an admin token', async () => {
    const { loginWording } = await import('./error-text.ts');
    expect(loginWording('UNAUTHORIZED', 'log in or send an admin token')).toBe('Log in to continue.');
    expect(loginWording('UNAUTHORIZED', 'email or password is incorrect')).toBeNull();
    expect(loginWording('FORBIDDEN', 'this needs an admin token')).toBeNull();
  });
  it("takes the local day for date pickers, not UTC's", async () => {
    const { localDay } = await import('./format.ts');
    const tz = process.env['TZ'];
    try {
      process.env['TZ'] = 'America/Los_Angeles';
      expect(localDay(new Date('2026-11-28T04:51:00Z'))).toBe('2026-11-27'); // 20:51 on the 27th there
      process.env['TZ'] = 'Asia/Tokyo';
      expect(localDay(new Date('2026-11-27T16:30:00Z'))).toBe('2026-11-28'); // 01:30 on the 28th there
    } finally {
      if (tz === undefined) delete process.env['TZ'];
      else process.env['TZ'] = tz;
    }
  });
  it('shows context lengths as users read them', async () => {
    const { formatContext } = await import('./format.ts');
    expect(formatContext(131072)).toBe('128K');
    expect(formatContext(32768)).toBe('32K');
    expect(formatContext(1048576)).toBe('1M');
    expect(formatContext(200000)).toBe('200K');
    expect(formatContext(512)).toBe('512');
    expect(formatContext(null)).toBe('');
  });
  it('labels providers with one casing, keeping unknown ones', async () => {
    const { providerLabel } = await import('./format.ts');
    expect(providerLabel('deepseek-ai')).toBe('DeepSeek');
    expect(providerLabel('mistralai')).toBe('Mistral AI');
    expect(providerLabel('openai')).toBe('OpenAI');
    expect(providerLabel('Meta')).toBe('Meta');
    expect(providerLabel('acme')).toBe('Acme');
    expect(providerLabel('')).toBe('');
  });
  it('writes RFC 4180 CSV', async () => {
    const { toCsv } = await import('./format.ts');
    expect(
      toCsv([
        ['a', 'b'],
        ['x,y', 'say "hi"'],
        [1, null],
      ]),
    ).toBe('a,b\r\n"x,y","say ""hi"""\r\n1,\r\n');
  });
  it('checks the autoscaling knobs with the service bounds', async () => {
    const { scalingErrors, toAutoscaling, DEFAULT_SCALING } = await import('./autoscaling.ts');
    expect(scalingErrors(DEFAULT_SCALING)).toEqual({});
    expect(toAutoscaling(DEFAULT_SCALING)).toEqual({ targetConcurrency: null, scaleToZeroAfterSeconds: 900, scaleDownDelaySeconds: 60 });
    const bad = scalingErrors({ min: '3', max: '2', target: '0', toZero: '5', downDelay: '-1' });
    expect(Object.keys(bad).sort()).toEqual(['downDelay', 'min', 'target', 'toZero']);
    expect(scalingErrors({ ...DEFAULT_SCALING, max: '9' }).max).toContain('1 to 8');
  });
});
