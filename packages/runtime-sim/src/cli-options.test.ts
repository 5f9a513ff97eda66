import { describe, expect, it } from 'vitest';
import { parseCliOptions } from './cli-options.ts';

describe('parseCliOptions', () => {
  it('reads flags over SIM_* env defaults', () => {
    const c = parseCliOptions(['--port', '9001', '--model', 'a', '--model', 'b', '--itl-ms', '10', '--hang'], {
      SIM_ITL_MS: '99',
      SIM_TTFT_MS: '50',
      SIM_MODELS: 'x,y',
      SIM_CUT_AFTER_TOKENS: '4',
    });
    expect(c.port).toBe(9001);
    expect(c.host).toBe('127.0.0.1');
    expect(c.options).toMatchObject({ models: ['a', 'b'], itlMs: 10, ttftMs: 50, batchSlots: 64, apiKey: null });
    expect(c.options.faults).toEqual({ cutAfterTokens: 4, hang: true });
  });
  it('takes models from SIM_MODELS when no flag is given', () => {
    expect(parseCliOptions([], { SIM_MODELS: 'x, y' }).options.models).toEqual(['x', 'y']);
    expect(parseCliOptions([], {}).options.models).toEqual(['sim-model']);
  });
  it('throws naming the bad flag or option', () => {
    expect(() => parseCliOptions(['--ttft-ms', 'soon'], {})).toThrow(/--ttft-ms/);
    expect(() => parseCliOptions(['--batch-slots', '0'], {})).toThrow(/batchSlots/);
    expect(() => parseCliOptions(['--error-rate', '2'], {})).toThrow(/errorRate/);
    expect(() => parseCliOptions(['--nope'], {})).toThrow();
  });
});
