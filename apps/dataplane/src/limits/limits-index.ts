import type { ConfigSnapshot } from '@infer/shared';

/** What the limits need from one catalog entry. */
export interface EndpointLimits {
  readonly contextLength: number | null;
  /** The Concurrency multiplier ("2x" -> 2), or null. */
  readonly concurrency: number | null;
}

/** A key's effective RPM/TPM (null: unlimited). */
export interface KeyRateLimits {
  readonly rpm: number | null;
  readonly tpm: number | null;
}

export interface LimitsIndex {
  readonly keys: ReadonlyMap<string, KeyRateLimits>;
  readonly endpoints: ReadonlyMap<string, EndpointLimits>;
}

export interface DefaultRateLimits {
  readonly rpm: number | null;
  readonly tpm: number | null;
}

const positive = (n: number | null | undefined): number | null => (typeof n === 'number' && n > 0 ? n : null);

/** Indexes a snapshot's limits once per config version: the key's own limit, else its tenant's, else the default. */
export function buildLimitsIndex(s: ConfigSnapshot, defaults: DefaultRateLimits): LimitsIndex {
  const tenants = new Map(s.tenants.map((t) => [t.id, t] as const));
  const keys = new Map<string, KeyRateLimits>();
  for (const k of s.keys) {
    const t = tenants.get(k.tenantId);
    keys.set(k.id, Object.freeze({
      rpm: positive(k.rpmLimit) ?? positive(t?.rpmLimit) ?? defaults.rpm,
      tpm: positive(k.tpmLimit) ?? positive(t?.tpmLimit) ?? defaults.tpm,
    }));
  }
  const endpoints = new Map<string, EndpointLimits>();
  for (const e of s.endpoints) {
    endpoints.set(e.id, Object.freeze({ contextLength: positive(e.contextLength), concurrency: positive(e.concurrency) }));
  }
  return Object.freeze({ keys, endpoints });
}
