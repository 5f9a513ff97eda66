import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { genReqId, meterId, requestUuid } from './request-id.ts';

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('request ids', () => {
  it('are version-4 UUIDs, all different, across many batches', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5_000; i++) {
      const id = requestUuid();
      expect(id).toMatch(V4);
      seen.add(id);
    }
    expect(seen.size).toBe(5_000);
  });

  it('spread over every hex digit in every random position (no position stuck or biased to a few values)', () => {
    const digits = Array.from({ length: 36 }, () => new Set<string>());
    for (let i = 0; i < 2_000; i++) [...requestUuid()].forEach((c, p) => digits[p]!.add(c));
    digits.forEach((set, p) => {
      if ([8, 13, 18, 23].includes(p)) expect([...set]).toEqual(['-']);
      else if (p === 14) expect([...set]).toEqual(['4']);
      else if (p === 19) expect(set.size).toBe(4);
      else expect(set.size).toBe(16);
    });
  });

  it("keep a caller's plain x-request-id and suffix it with a fresh UUID for metering", () => {
    const req = (id?: string): IncomingMessage => ({ headers: id === undefined ? {} : { 'x-request-id': id } }) as IncomingMessage;
    expect(genReqId(req('trace-42'))).toBe('trace-42');
    expect(genReqId(req('bad id with spaces'))).toMatch(V4);
    expect(genReqId(req())).toMatch(V4);
    const a = meterId('trace-42', true);
    const b = meterId('trace-42', true);
    expect(a).toMatch(/^trace-42\.[0-9a-f-]{36}$/);
    expect(a).not.toBe(b);
    expect(meterId('x'.repeat(128), true).length).toBe(90 + 1 + 36);
    expect(meterId('generated', false)).toBe('generated');
  });
});
