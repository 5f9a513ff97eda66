import { describe, expect, it } from 'vitest';
import {
  applyDeltas,
  chatRequestSchema,
  formatColdStart,
  formatConcurrency,
  formatParameterSize,
  formatSummary,
  formatTokenPrice,
  generateSecret,
  hasValidChecksum,
  parseColdStart,
  parseConcurrency,
  parseParameterSize,
  trimTrailingSlashes,
  DEFAULT_SUMMARY,
  type ConfigSnapshot,
} from './index.ts';

describe('chat request coercion', () => {
  it('accepts the spec string forms of max_tokens, stream and temperature', () => {
    const r = chatRequestSchema.parse({ messages: [{ role: 'user', content: 'hi' }], max_tokens: '256', stream: 'true', temperature: '0.7' });
    expect(r).toMatchObject({ max_tokens: 256, stream: true, temperature: 0.7 });
  });
  it('rejects other strings and names the field', () => {
    for (const [field, value] of [
      ['max_tokens', '12abc'],
      ['stream', 'yes'],
      ['temperature', 'hot'],
    ] as const) {
      const res = chatRequestSchema.safeParse({ messages: [{ role: 'user', content: 'x' }], [field]: value });
      expect(res.success).toBe(false);
      expect(res.error?.issues[0]?.path[0]).toBe(field);
    }
  });
  it('keeps unknown pass-through fields', () => {
    const r = chatRequestSchema.parse({ messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' } });
    expect(r['response_format']).toEqual({ type: 'json_object' });
  });
});

describe('catalog string forms', () => {
  it('round-trips each form', () => {
    expect(formatParameterSize(parseParameterSize('70B'))).toBe('70B');
    expect(formatConcurrency(parseConcurrency('2x'))).toBe('2x');
    expect(formatColdStart(parseColdStart('5 sec'))).toBe('5 sec');
    expect(parseParameterSize('')).toBeNull();
    expect(() => parseConcurrency('two')).toThrow(/Concurrency/);
  });
  it('uses the default summary when none was added', () => {
    expect(formatSummary(null)).toBe(DEFAULT_SUMMARY);
    expect(formatSummary('  ')).toBe(DEFAULT_SUMMARY);
    expect(formatSummary('Fast.')).toBe('Fast.');
  });
  it('shows a token price to the cent at least and never rounds a finer one away', () => {
    expect(formatTokenPrice(0.2, 0.6)).toBe('$0.20 / $0.60 per 1M tokens (input / output)');
    expect(formatTokenPrice(0.125, null)).toBe('$0.125 / — per 1M tokens (input / output)');
  });
});

describe('secrets', () => {
  it('generates checksummed secrets and detects a typo', () => {
    const s = generateSecret('infk_');
    expect(s).toMatch(/^infk_[0-9A-Za-z]{38}$/);
    expect(hasValidChecksum(s)).toBe(true);
    const typo = s.slice(0, 10) + (s[10] === 'a' ? 'b' : 'a') + s.slice(11);
    expect(hasValidChecksum(typo)).toBe(false);
  });
});

describe('applyDeltas', () => {
  it('upserts and deletes in version order and skips old versions', () => {
    const base: ConfigSnapshot = { version: 1, tenants: [], keys: [], endpoints: [], deployments: [] };
    const key = { id: 'k1', tenantId: 't', hash: 'h', prefix: 'p', expiresAt: null, rpmLimit: null, tpmLimit: null };
    const next = applyDeltas(base, [
      { version: 1, kind: 'key', id: 'k0', op: 'upsert', value: { ...key, id: 'k0' } },
      { version: 2, kind: 'key', id: 'k1', op: 'upsert', value: key },
    ]);
    expect(next.keys.map((k) => k.id)).toEqual(['k1']);
    expect(next.version).toBe(2);
    expect(base.keys).toHaveLength(0);
    expect(applyDeltas(next, [{ version: 3, kind: 'key', id: 'k1', op: 'delete', value: null }]).keys).toHaveLength(0);
  });
});

describe('trimTrailingSlashes', () => {
  it('drops only the trailing run, in one pass', () => {
    expect(trimTrailingSlashes('http://h/v1///')).toBe('http://h/v1');
    expect(trimTrailingSlashes('http://h/v1')).toBe('http://h/v1');
    expect(trimTrailingSlashes('///')).toBe('');
    expect(trimTrailingSlashes('')).toBe('');
    // Half a million slashes then a letter: the regex it replaced retried the run from each slash.
    const many = `${'/'.repeat(500_000)}a`;
    expect(trimTrailingSlashes(many)).toBe(many);
    expect(trimTrailingSlashes(`a${'/'.repeat(500_000)}`)).toBe('a');
  });
});
