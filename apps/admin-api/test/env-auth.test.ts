import { describe, expect, it } from 'vitest';
import { loadEnv } from '../src/env.ts';

const base = { NODE_TOKEN: 'n'.repeat(20) };

describe('auth environment', () => {
  it('TRUST_PROXY: off by default; true, a hop count or addresses/CIDRs; anything else is refused by name', () => {
    expect(loadEnv(base).TRUST_PROXY).toBe(false);
    expect(loadEnv({ ...base, TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(false);
    expect(loadEnv({ ...base, TRUST_PROXY: 'true' }).TRUST_PROXY).toBe(true);
    expect(loadEnv({ ...base, TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(loadEnv({ ...base, TRUST_PROXY: '10.0.0.0/8, loopback, ::1' }).TRUST_PROXY).toEqual(['10.0.0.0/8', 'loopback', '::1']);
    expect(() => loadEnv({ ...base, TRUST_PROXY: 'proxy.example.com' })).toThrow(/TRUST_PROXY: "proxy.example.com" is not a proxy address/);
  });

  it('API statement timeout and per-caller budget have defaults and bounds', () => {
    const env = loadEnv(base);
    expect(env.API_STATEMENT_TIMEOUT_MS).toBe(5000);
    expect(env.API_POINTS_PER_MINUTE).toBe(1200);
    expect(loadEnv({ ...base, API_STATEMENT_TIMEOUT_MS: '0' }).API_STATEMENT_TIMEOUT_MS).toBe(0);
    expect(() => loadEnv({ ...base, API_POINTS_PER_MINUTE: '0' })).toThrow(/API_POINTS_PER_MINUTE/);
  });
});
