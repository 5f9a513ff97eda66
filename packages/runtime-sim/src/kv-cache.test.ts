import { describe, expect, it } from 'vitest';
import { blockHashes, createKvCache } from './kv-cache.ts';
import { promptTokenIds, countPromptTokens } from './tokenizer.ts';

const tokens = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

describe('blockHashes', () => {
  it('names full blocks only, and chains: a block matches only after the same prefix', () => {
    const a = blockHashes(tokens(0, 40), 16);
    expect(a).toHaveLength(2);
    // Same second block after a different first block: a different hash.
    const b = blockHashes([...tokens(100, 16), ...tokens(16, 16)], 16);
    expect(b[1]).not.toBe(a[1]);
    expect(blockHashes(tokens(0, 32), 16)).toEqual(a);
  });
  it('hashes prompts laid out as token ids as long as countPromptTokens says', () => {
    const messages = [
      { role: 'system', content: 'You are a careful assistant, answer briefly.' },
      { role: 'user', content: 'hello there, world' },
    ];
    expect(promptTokenIds(messages).length).toBe(countPromptTokens(messages));
  });
});

describe('KV cache with prefix caching', () => {
  it('matches the cached prefix of a later prompt and counts queries and hits in tokens', () => {
    const kv = createKvCache({ capacityTokens: 1024, blockSize: 16, prefixCaching: true });
    const first = blockHashes(tokens(0, 100), 16); // 6 full blocks
    const a = kv.tryAdmit(first, 100, 10)!;
    expect(a.cachedTokens).toBe(0);
    expect(kv.usedBlocks).toBe(7); // ceil(110 / 16)
    a.prefilled();
    a.release();
    expect(kv.usedBlocks).toBe(0);
    expect(kv.cachedFreeBlocks).toBe(6);
    expect(kv.usage()).toBe(0);
    // A longer prompt sharing the first 64 tokens: 4 blocks found.
    const second = blockHashes([...tokens(0, 64), ...tokens(500, 60)], 16);
    const b = kv.tryAdmit(second, 124, 4)!;
    expect(b.cachedTokens).toBe(64);
    expect(kv.queriedTokens).toBe(224);
    expect(kv.hitTokens).toBe(64);
    b.release();
  });

  it('always computes the last prompt token, even when the whole prompt is cached', () => {
    const kv = createKvCache({ capacityTokens: 1024, blockSize: 16, prefixCaching: true });
    const h = blockHashes(tokens(0, 32), 16);
    const a = kv.tryAdmit(h, 32, 1)!;
    a.prefilled();
    a.release();
    expect(kv.tryAdmit(h, 32, 1)!.cachedTokens).toBe(16);
  });

  it('refuses a request when memory is short, and evicts the least recently released cached blocks first', () => {
    const kv = createKvCache({ capacityTokens: 160, blockSize: 16, prefixCaching: true }); // 10 blocks
    const p1 = blockHashes(tokens(0, 64), 16);
    const p2 = blockHashes(tokens(1000, 64), 16);
    const a = kv.tryAdmit(p1, 64, 16)!; // 5 blocks
    const b = kv.tryAdmit(p2, 64, 16)!; // 5 blocks
    expect(kv.usage()).toBe(1);
    expect(kv.tryAdmit(blockHashes(tokens(5000, 16), 16), 16, 1)).toBeNull();
    a.prefilled();
    b.prefilled();
    a.release(); // p1's 4 blocks: cached, older
    b.release(); // p2's 4 blocks: cached, newer
    expect(kv.cachedFreeBlocks).toBe(8);
    // 6 new blocks: 2 never-cached ones, then 4 evicted, p1's first.
    const c = kv.tryAdmit(blockHashes(tokens(7000, 80), 16), 80, 16)!;
    expect(c.cachedTokens).toBe(0);
    expect(kv.peekCachedTokens(p1, 64)).toBe(0);
    expect(kv.peekCachedTokens(p2, 64)).toBe(48);
    c.release();
  });

  it('a prefix held by a running request is shared, not copied', () => {
    const kv = createKvCache({ capacityTokens: 160, blockSize: 16, prefixCaching: true });
    const h = blockHashes(tokens(0, 64), 16);
    const a = kv.tryAdmit(h, 64, 16)!;
    a.prefilled();
    const b = kv.tryAdmit(h, 64, 16)!; // 3 shared + 2 new
    expect(b.cachedTokens).toBe(48);
    expect(kv.usedBlocks).toBe(7);
    a.release();
    b.release();
    expect(kv.usedBlocks).toBe(0);
  });

  it('matches nothing with prefix caching off', () => {
    const kv = createKvCache({ capacityTokens: 1024, blockSize: 16, prefixCaching: false });
    const h = blockHashes(tokens(0, 64), 16);
    const a = kv.tryAdmit(h, 64, 1)!;
    a.prefilled();
    a.release();
    expect(kv.tryAdmit(h, 64, 1)!.cachedTokens).toBe(0);
    expect(kv.hitTokens).toBe(0);
  });
});
