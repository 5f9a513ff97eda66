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
