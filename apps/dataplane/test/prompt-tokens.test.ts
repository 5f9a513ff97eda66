// Reliability 8 (issue 9): the prompt of a cut stream was estimated as characters / 4 (11% low). The
// runtime's count is used when it sent one; otherwise a real tokenizer of the model's family counts it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countPromptTokens, encodingFor, MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS } from '../src/usage/prompt-tokens.ts';
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
