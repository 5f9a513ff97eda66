import { describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '@infer/shared';
import { ApiError } from '@infer/shared';
import { authenticate, TOKEN_CACHE_MAX } from '../src/auth.ts';
import { buildConfigView } from '../src/config/config-view.ts';
import { SECRET_A, SECRET_B, makeSnapshot } from './helpers.ts';

const URLS = { sim: 'http://127.0.0.1:9', faulty: 'http://127.0.0.1:9', dead: 'http://127.0.0.1:9' };
const bearer = (token: string): string => `Bearer ${token}`;
const codeOf = (r: unknown): string | null => (r instanceof ApiError ? r.code : null);

/** The snapshot without the key of tenant B (revoked), as the control plane would push it. */
function withoutKeyB(s: ConfigSnapshot): ConfigSnapshot {
  return { ...s, version: s.version + 1, keys: s.keys.filter((k) => k.id !== 'k-b') };
}

/** The snapshot with tenant A's key expiring at `at`. */
function keyAExpiresAt(s: ConfigSnapshot, at: string): ConfigSnapshot {
  return { ...s, version: s.version + 1, keys: s.keys.map((k) => (k.id === 'k-a' ? { ...k, expiresAt: at } : k)) };
}

describe('authenticate: keys resolved once per snapshot', () => {
  const base = makeSnapshot(URLS);
  const now = Date.parse('2026-06-01T00:00:00Z');

  it('resolves the same key for a repeated token, and refuses a revoked one as soon as the next snapshot is in', () => {
    const v1 = buildConfigView(base);
    for (let i = 0; i < 3; i++) {
      expect(authenticate(v1, bearer(SECRET_A), now)).toMatchObject({ id: 'k-a' });
      expect(authenticate(v1, bearer(SECRET_B), now)).toMatchObject({ id: 'k-b' });
    }
    const v2 = buildConfigView(withoutKeyB(base));
    expect(codeOf(authenticate(v2, bearer(SECRET_B), now))).toBe('invalid_api_key');
    expect(authenticate(v2, bearer(SECRET_A), now)).toMatchObject({ id: 'k-a' });
    // The older snapshot still answers for itself (a request admitted under it), and nothing leaks between them.
    expect(authenticate(v1, bearer(SECRET_B), now)).toMatchObject({ id: 'k-b' });
  });

  it('checks expiry on every request, also for a key it resolved before', () => {
    const view = buildConfigView(keyAExpiresAt(base, '2026-06-01T00:00:10.000Z'));
    expect(authenticate(view, bearer(SECRET_A), now)).toMatchObject({ id: 'k-a' });
    expect(codeOf(authenticate(view, bearer(SECRET_A), now + 10_000))).toBe('invalid_api_key');
    expect(codeOf(authenticate(view, bearer(SECRET_A), now + 20_000))).toBe('invalid_api_key');
  });

  it('never turns a wrong token into a key: near misses, after many wrong tokens and past the cache bound', () => {
    const view = buildConfigView(base);
    expect(authenticate(view, bearer(SECRET_A), now)).toMatchObject({ id: 'k-a' });
    const nearMisses = [SECRET_A.slice(0, -1), `${SECRET_A}0`, SECRET_A.toUpperCase(), SECRET_A.slice(0, -1) + 'x'];
    for (const t of nearMisses) expect(codeOf(authenticate(view, bearer(t), now))).toBe('invalid_api_key');
    for (let i = 0; i < TOKEN_CACHE_MAX + 10; i++) {
      expect(codeOf(authenticate(view, bearer(`infk_wrong_${i}`), now))).toBe('invalid_api_key');
    }
    expect(authenticate(view, bearer(SECRET_A), now)).toMatchObject({ id: 'k-a' });
    expect(authenticate(view, bearer(SECRET_B), now)).toMatchObject({ id: 'k-b' });
  });

  it('keeps the header rules: scheme, missing token, surrounding spaces', () => {
    const view = buildConfigView(base);
    expect(codeOf(authenticate(view, undefined, now))).toBe('missing_api_key');
    expect(codeOf(authenticate(view, 'Bearer ', now))).toBe('missing_api_key');
    expect(codeOf(authenticate(view, `Basic ${SECRET_A}`, now))).toBe('invalid_api_key');
    expect(authenticate(view, `bearer ${SECRET_A}  `, now)).toMatchObject({ id: 'k-a' });
    expect(codeOf(authenticate(null, bearer(SECRET_A), now))).toBe('service_unavailable');
  });
});
