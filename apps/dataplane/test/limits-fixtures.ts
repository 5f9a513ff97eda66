import { hashSecret } from '@infer/shared';
import type { ConfigSnapshot } from '@infer/shared';
import type { DataplaneAppOptions } from '../src/index.ts';
import type { LimitsOptions } from '../src/limits/limits.ts';
import { NAME, deadUrl, makeSnapshot, memorySink, startDataplane } from './helpers.ts';
import type { StartedApp } from './helpers.ts';

export const CHAT = '/endpoints/v1/chat/completions';

/** A prompt whose chars/4 estimate (12 with overheads) is at least the simulator's count (11). */
export const smallBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: NAME,
  messages: [{ role: 'user', content: 'abcdefgh abcdefgh' }],
  max_tokens: 10,
  ...extra,
});

export interface LimitedNode extends StartedApp {
  readonly usage: ReturnType<typeof memorySink>;
}

/** A node over `simUrl` with the snapshot changed by `mutate` and the given limits. */
export async function startLimitedNode(
  simUrl: string,
  mutate: (s: ConfigSnapshot) => void,
  limits: LimitsOptions,
  extra: Partial<DataplaneAppOptions> = {},
): Promise<LimitedNode> {
  const snapshot = makeSnapshot({ sim: simUrl, faulty: simUrl, dead: await deadUrl() });
  mutate(snapshot);
  const usage = memorySink();
  const started = await startDataplane(snapshot, usage, { ...extra, limits });
  return { ...started, usage };
}

/** Sets key k-a's own limits. */
export const keyLimits =
  (rpm: number | null, tpm: number | null) =>
  (s: ConfigSnapshot): void => {
    const k = s.keys.find((x) => x.id === 'k-a')!;
    k.rpmLimit = rpm;
    k.tpmLimit = tpm;
  };

/** A second key of tenant t-a (k-a's tenant), with no limits of its own. */
export const SECOND_A = 'infk_test_tenant_a_second_key_000000';

/** Tenant t-a's limits and k-a's own, and a second key of t-a (`SECOND_A`) with none. */
export const tenantLimits =
  (tenant: { rpm?: number; tpm?: number }, keyA: { rpm?: number; tpm?: number }) =>
  (s: ConfigSnapshot): void => {
    const t = s.tenants.find((x) => x.id === 't-a')!;
    t.rpmLimit = tenant.rpm ?? null;
    t.tpmLimit = tenant.tpm ?? null;
    const a = s.keys.find((k) => k.id === 'k-a')!;
    a.rpmLimit = keyA.rpm ?? null;
    a.tpmLimit = keyA.tpm ?? null;
    s.keys.push({ ...a, id: 'k-a2', hash: hashSecret(SECOND_A), prefix: SECOND_A.slice(0, 12), rpmLimit: null, tpmLimit: null });
  };

export const RATE_HEADERS = [
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
] as const;

/** OpenAI's duration form: 20ms, 6s, 8.64s, 1m0s. */
export const DURATION = /^(\d+ms|(\d+h)?(\d+m)?\d+(\.\d+)?s)$/;
