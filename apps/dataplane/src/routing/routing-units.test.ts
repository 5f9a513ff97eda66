import { describe, expect, it } from 'vitest';
import { parseReplicaMetrics } from './parse-replica-metrics.ts';
import { createPrefixIndex } from './prefix-index.ts';
import { promptBlocks } from './prompt-blocks.ts';
import { defaultRoutingSettings } from './routing-settings.ts';
import { scoreReplicas } from './scorer.ts';

const body = (system: string, user: string) => ({
  messages: [
    { role: 'system', content: system },
    { role: 'user', content: user },
  ],
});

describe('prompt blocks', () => {
  it('chain: prompts sharing a long system prompt share their leading blocks, and only those', () => {
    const sys = 'a'.repeat(1000);
    const a = promptBlocks(body(sys, 'first question'), 1, 128);
    const b = promptBlocks(body(sys, 'another one entirely'), 1, 128);
    expect(a.length).toBeGreaterThanOrEqual(7);
    expect(b.slice(0, 7)).toEqual(a.slice(0, 7));
    // Another target seeds another chain.
    expect(promptBlocks(body(sys, 'first question'), 2, 128)[0]).not.toBe(a[0]);
    // A different start changes every block after it.
    const c = promptBlocks(body(`x${sys.slice(1)}`, 'first question'), 1, 128);
    expect(c.some((h, i) => h === a[i])).toBe(false);
  });
  it('hashes the stream of role, 0, text, 1 per message in pairs of characters, whatever the lengths', () => {
    // The definition, on the whole stream at once.
    const reference = (messages: { role: string; content: string }[], seed: number, blockChars: number): number[] => {
      const stream: number[] = [];
      for (const m of messages) {
        for (const ch of m.role) stream.push(ch.charCodeAt(0));
        stream.push(0);
        for (let i = 0; i < m.content.length; i++) stream.push(m.content.charCodeAt(i));
        stream.push(1);
      }
      let a = (0x811c9dc5 ^ seed) >>> 0;
      let b = (0x9747b28c ^ Math.imul(seed, 0x5bd1e995)) >>> 0;
      const out: number[] = [];
      for (let i = 0; i + 1 < stream.length; i += 2) {
        const c = stream[i]! | (stream[i + 1]! << 16);
        a = Math.imul(a ^ c, 0x01000193);
        b = Math.imul(b ^ c, 0x5bd1e995);
        b ^= b >>> 13;
        if ((i + 2) % blockChars === 0) out.push((a >>> 0) * 0x100000 + ((b >>> 0) & 0xfffff));
      }
      return out;
    };
    const texts = ['', 'a', 'bc', 'déf', '東京の', 'x'.repeat(127), 'y'.repeat(128), 'z'.repeat(129)];
    for (const blockChars of [2, 8, 16]) {
      for (const first of texts) {
        for (const second of texts) {
          const messages = [
            { role: 'system', content: first },
            { role: 'user', content: second },
            { role: 'tool', content: `${first}${second}` },
          ];
          expect(promptBlocks({ messages }, 7, blockChars)).toEqual(reference(messages, 7, blockChars));
        }
      }
    }
  });
  it('is bounded', () => {
    expect(promptBlocks(body('z'.repeat(1_000_000), ''), 1, 128, 512)).toHaveLength(512);
  });
});

describe('prefix index', () => {
  it('reports how many leading blocks each replica holds, and forgets the least recently used beyond its bound', () => {
    const idx = createPrefixIndex(6);
    idx.record([1, 2, 3, 4], 'r-a');
    idx.record([1, 2, 9], 'r-b');
    const m = idx.match([1, 2, 3, 4, 5], ['r-a', 'r-b', 'r-c']);
    expect(m.get('r-a')).toBe(4);
    expect(m.get('r-b')).toBe(2);
    expect(m.has('r-c')).toBe(false);
    expect(idx.size).toBe(5);
    idx.record([7, 8], 'r-c'); // 7 entries > 6: block 3 (least recently used) goes
    expect(idx.size).toBe(6);
    expect(idx.match([1, 2, 3, 4], ['r-a']).get('r-a')).toBe(2);
  });

  it('never holds more than its bound, and never evicts a block touched once per half of it', () => {
    const max = 64;
    const idx = createPrefixIndex(max);
    const hot = [1_000_000, 1_000_001];
    for (let i = 0; i < 5_000; i++) {
      idx.record([i], 'r-cold');
      // The hot prefix comes back once per max / 2 new blocks (here every 30).
      if (i % 30 === 0) idx.record(hot, i % 60 === 0 ? 'r-a' : 'r-b');
      expect(idx.size).toBeLessThanOrEqual(max);
    }
    expect(idx.match(hot, ['r-a', 'r-b']).get('r-b')).toBe(2);
    // A block not seen for more than the bound is gone.
    expect(idx.match([0], ['r-cold']).has('r-cold')).toBe(false);
    expect(idx.match([4_999], ['r-cold']).get('r-cold')).toBe(1);
  });
});

describe('scorer', () => {
  const load = (running: number, waiting: number, kvUsage: number) => ({ running, waiting, kvUsage, at: 0, inFlightAtScrape: 0 });
  it('prefers the replica holding the prefix at equal load, and gives it up once the work queued there costs more than a prefill elsewhere', () => {
    const s = defaultRoutingSettings;
    const even = scoreReplicas(
      [
        { id: 'a', inFlight: 2, pendingPrefillBlocks: 0, load: load(2, 0, 0.2), prefixMatch: 0.9 },
        { id: 'b', inFlight: 2, pendingPrefillBlocks: 0, load: load(2, 0, 0.2), prefixMatch: 0 },
      ],
      20,
      s,
    );
    expect(even[0]!.score).toBeGreaterThan(even[1]!.score);
    // Three requests waiting there, plus a whole prompt's prefill pending from this node.
    const busy = scoreReplicas(
      [
        { id: 'a', inFlight: 20, pendingPrefillBlocks: 20, load: load(20, 3, 0.2), prefixMatch: 0.9 },
        { id: 'b', inFlight: 2, pendingPrefillBlocks: 0, load: load(2, 0, 0.2), prefixMatch: 0 },
      ],
      20,
      s,
    );
    expect(busy[1]!.score).toBeGreaterThan(busy[0]!.score);
    expect(busy[0]!.queue).toBe(4);
  });
  it('counts a full KV cache against a replica', () => {
    const [a, b] = scoreReplicas(
      [
        { id: 'a', inFlight: 0, pendingPrefillBlocks: 0, load: load(0, 0, 0.95), prefixMatch: 0 },
        { id: 'b', inFlight: 0, pendingPrefillBlocks: 0, load: load(0, 0, 0.1), prefixMatch: 0 },
      ],
      10,
      defaultRoutingSettings,
    );
    expect(b!.score).toBeGreaterThan(a!.score);
  });
});

describe('replica metrics text', () => {
  it("reads vLLM's gauges summed over label sets, and says null for a runtime without them", () => {
    const text = [
      '# HELP vllm:num_requests_running x',
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
      'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 4.0',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
      'vllm:num_requests_waiting_by_reason{reason="x"} 99',
    ].join('\n');
    expect(parseReplicaMetrics(text)).toEqual({ running: 5, waiting: 4, kvUsage: 0.25 });
    expect(parseReplicaMetrics('vllm:gpu_cache_usage_perc 0.5\nvllm:num_requests_waiting 1')).toEqual({ running: 0, waiting: 1, kvUsage: 0.5 });
    expect(parseReplicaMetrics('# nothing here\nprocess_cpu_seconds_total 1')).toBeNull();
  });
});
