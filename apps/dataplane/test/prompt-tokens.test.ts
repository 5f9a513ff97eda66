// Reliability 8 (issue 9): the prompt of a cut stream was estimated as characters / 4 (11% low). The
// runtime's count is used when it sent one; otherwise a real tokenizer of the model's family counts it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import {
  countPromptTokens,
  countTexts,
  encodingFor,
  EXACT_CHARS,
  MESSAGE_OVERHEAD_TOKENS,
  PIECE_CHARS,
  REPLY_PRIMING_TOKENS,
  SAMPLE_PIECES,
  type Encoding,
} from '../src/usage/prompt-tokens.ts';
import { NAME, SERVED, chatBody, deadUrl, makeSnapshot, memorySink, post, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

const overhead = (messages: number): number => messages * MESSAGE_OVERHEAD_TOKENS + REPLY_PRIMING_TOKENS;

describe('prompt token count without the runtime usage', () => {
  it('matches the BPE tokenizer of the family (reference counts of cl100k_base / o200k_base)', () => {
    const fox = 'The quick brown fox jumps over the lazy dog.'; // 10 tokens in both
    const report = 'Summarise the attached quarterly report in three bullet points for the board.'; // 15
    const body = {
      model: 'meta-llama/Llama-3.3-70B-Instruct',
      messages: [
        { role: 'system', content: fox },
        { role: 'user', content: report },
      ],
    };
    expect(countPromptTokens(body)).toBe(10 + 15 + overhead(2));
    expect(countPromptTokens({ model: 'x', messages: [{ role: 'user', content: [{ type: 'text', text: 'hello world' }] }] })).toBe(2 + overhead(1));
    expect(countPromptTokens({ model: 'x', messages: [{ role: 'user', content: 'a <|endoftext|> in the text' }] })).toBeGreaterThan(overhead(1));
  });

  it('bounds its work on a huge prompt without spaces, and stays close on a long real one', () => {
    const cl100k = createRequire(import.meta.url)('gpt-tokenizer/encoding/cl100k_base') as Encoding;
    const pieces: number[] = [];
    const watched: Encoding = {
      countTokens: (text, options) => {
        pieces.push(text.length);
        return cl100k.countTokens(text, options);
      },
    };
    // A megabyte of letters without a space (counted whole, BPE over it took minutes) in two messages.
    let seed = 7;
    const letters = Array.from({ length: 500_000 }, () => String.fromCharCode(97 + ((seed = (seed * 48271) % 2147483647) % 26))).join('');
    const huge = {
      model: 'x',
      messages: [
        { role: 'user', content: letters },
        { role: 'user', content: letters.toUpperCase() },
      ],
    };
    const tokens = countPromptTokens(huge, watched);
    expect(Math.max(...pieces)).toBeLessThanOrEqual(PIECE_CHARS);
    expect(pieces.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(SAMPLE_PIECES * PIECE_CHARS);
    expect(tokens).toBeGreaterThan(1_000_000 / 4);

    // Long English, sampled: within 3% of the whole count (which is quick for text with spaces).
    const words =
      'the board asked for a summary of revenue growth across regions while engineering shipped seven releases and support closed tickets faster than planned'.split(
        ' ',
      );
    const essay = Array.from({ length: 60_000 }, (_, i) => words[(i * 7 + (i >> 3)) % words.length]).join(' ');
    expect(essay.length).toBeGreaterThan(EXACT_CHARS * 10);
    const whole = cl100k.countTokens(essay, { disallowedSpecial: new Set() });
    const sampled = countPromptTokens({ model: 'x', messages: [{ role: 'user', content: essay }] }) - overhead(1);
    expect(Math.abs(sampled - whole) / whole).toBeLessThan(0.03);
    // Up to EXACT_CHARS, single-spaced words are counted as the tokenizer counts them whole (pieces cut at a word).
    const short = essay.slice(0, EXACT_CHARS - 10);
    expect(countPromptTokens({ model: 'x', messages: [{ role: 'user', content: short }] })).toBe(
      cl100k.countTokens(short, { disallowedSpecial: new Set() }) + overhead(1),
    );
  });

  it('a long prompt whose filler sits where fixed samples fell still bills at least its estimate, close to its count', () => {
    const cl100k = createRequire(import.meta.url)('gpt-tokenizer/encoding/cl100k_base') as Encoding;
    // 8 stretches of 25,000 characters: 1,500 of ASCII filler where a fixed sample would start, then CJK (a token or
    // more each). Counting only the filler's stretches billed the prompt about ten times low.
    let seed = 3;
    const cjk = (n: number) => Array.from({ length: n }, () => String.fromCharCode(0x4e00 + ((seed = (seed * 48271) % 2147483647) % 3000))).join('');
    const content = Array.from({ length: 8 }, () => `${'a'.repeat(1_500)}${cjk(23_500)}`).join('');
    const body = { model: 'x', messages: [{ role: 'user', content }] };
    let real = 0;
    for (let i = 0; i < content.length; i += 1000) real += cl100k.countTokens(content.slice(i, i + 1000), { disallowedSpecial: new Set() });
    // Wherever the random pieces fall, even all in the filler (a sampler that always answers 0), the bill is at least
    // half a token per CJK character.
    expect(countTexts(cl100k, [content], () => 0)).toBeGreaterThanOrEqual(188_000 / 2);
    expect(countPromptTokens(body) - overhead(1)).toBeGreaterThan(real * 0.8);
  });

  it('picks the ranks by model family', () => {
    expect(encodingFor('meta-llama/Llama-3.3-70B-Instruct')).toBe('cl100k_base');
    expect(encodingFor('Qwen/Qwen2.5-7B-Instruct')).toBe('cl100k_base');
    expect(encodingFor('gpt-4o-mini')).toBe('o200k_base');
    expect(encodingFor('openai/gpt-oss-120b')).toBe('o200k_base');
  });
});

describe('prompt tokens in usage records', () => {
  let sim: StartedSim;
  let dp: StartedApp;
  const sink = memorySink();
  beforeAll(async () => {
    sim = await startSim();
    dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), sink);
  });
  afterAll(async () => {
    await dp.app.close();
    await sim.sim.close();
  });
  const recordFor = (id: string) => sink.records.find((r) => r.requestId.startsWith(`${id}.`));

  it("uses the runtime's count when it sent one", async () => {
    const res = await post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME, stream: true, max_tokens: 4 }), undefined, {
      'x-request-id': 'pt-whole',
    });
    await res.text();
    await waitFor(() => recordFor('pt-whole') !== undefined);
    const entry = sim.sim.stats().requests.find((e) => e.id.startsWith('chatcmpl-pt-whole.'))!;
    expect(recordFor('pt-whole')).toMatchObject({ estimated: false, promptTokens: entry.promptTokens });
  });

  it('counts a cut stream with the tokenizer of the served model', async () => {
    sim.sim.setFaults({ cutAfterTokens: 2 });
    try {
      const body = chatBody({ model: NAME, stream: true, max_tokens: 20 });
      const res = await post(`${dp.url}/endpoints/v1/chat/completions`, body, undefined, { 'x-request-id': 'pt-cut' });
      await res.text();
      await waitFor(() => recordFor('pt-cut') !== undefined);
      const r = recordFor('pt-cut')!;
      expect(r.estimated).toBe(true);
      expect(r.promptTokens).toBe(countPromptTokens({ ...body, model: SERVED }));
    } finally {
      sim.sim.setFaults({});
    }
  });
});
