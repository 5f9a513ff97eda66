import { describe, expect, it } from 'vitest';
import { boundedDistance, createModelSuggester } from './model-suggester.ts';

/** Plain Levenshtein, for comparison. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const curr = [i];
    for (let j = 1; j <= b.length; j++) curr[j] = Math.min(prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1), prev[j]! + 1, curr[j - 1]! + 1);
    prev = curr;
  }
  return prev[b.length]!;
}

describe('boundedDistance', () => {
  it('equals Levenshtein up to the limit, and limit + 1 beyond it', () => {
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const word = () => Array.from({ length: rnd(9) }, () => 'abc'[rnd(3)]).join('');
    for (let n = 0; n < 3000; n++) {
      const a = word();
      const b = word();
      const limit = rnd(4);
      expect(boundedDistance(a, b, limit), `${a} ${b} ${limit}`).toBe(Math.min(distance(a, b), limit + 1));
    }
  });
});

describe('createModelSuggester', () => {
  const suggest = createModelSuggester([
    { name: 'Llama-3.3-70B-Instruct', provider: 'Meta', servedModels: ['meta-llama/Llama-3.3-70B-Instruct'] },
    { name: 'Mistral-Small-24B-Instruct', provider: 'mistralai', servedModels: ['mistralai/Mistral-Small-24B-Instruct-2501'] },
    { name: 'Phi-4', provider: 'microsoft', servedModels: ['microsoft/phi-4'] },
    { name: 'meta/llama-slash', provider: null, servedModels: [] },
  ]);

  it('finds the Name under case, prefixes, served ids and small typos', () => {
    expect(suggest('LLAMA-3.3-70B-INSTRUCT')).toBe('Llama-3.3-70B-Instruct');
    expect(suggest('mistralai/Mistral-Small-24B-Instruct-2501')).toBe('Mistral-Small-24B-Instruct');
    expect(suggest('Mistral-Small-24B-Instruct-2501')).toBe('Mistral-Small-24B-Instruct');
    expect(suggest('microsoft/Phi-4')).toBe('Phi-4');
    expect(suggest('phi4')).toBe('Phi-4');
    expect(suggest('Phi-5')).toBe('Phi-4');
    expect(suggest('llama-slash')).toBe('meta/llama-slash');
    expect(suggest('acme/meta/llama-slash')).toBe('meta/llama-slash');
    expect(suggest('Llama-3.3-70B-Instrcut')).toBe('Llama-3.3-70B-Instruct');
  });

  it('suggests nothing for a model close to no Name', () => {
    expect(suggest('gpt-4o')).toBeNull();
    expect(suggest('')).toBeNull();
    expect(suggest('/')).toBeNull();
    expect(suggest('Llama-3.1-8B-Instruct')).toBeNull();
    expect(suggest('a'.repeat(10_000))).toBeNull();
  });
});
