import { trimTrailingSlashes } from '@infer/shared';
import { dedicatedModelName } from '@infer/shared';
import { adapterFor } from '../runtimes/runtime-registry.ts';
import type { ConfigSnapshot, RuntimeKind, SnapshotDeployment, SnapshotEndpoint, SnapshotRouting, SnapshotTenant, SnapshotUpstream } from '@infer/shared';
import { createModelSuggester } from './model-suggester.ts';
import type { ModelSuggester } from './model-suggester.ts';

/** An upstream with everything the hot path needs precomputed once per snapshot. */
export interface ResolvedUpstream {
  readonly id: string;
  readonly kind: RuntimeKind;
  /** scheme://host:port: the pool key. */
  readonly origin: string;
  /** Base path + the runtime's chat completions path. */
  readonly chatPath: string;
  readonly servedModel: string;
  /** `Bearer <apiKey>` or null (never logged). */
  readonly authorization: string | null;
}

/** RPM/TPM from the snapshot (a key's own, or its tenant's); null: none set. */
export interface KeyRateLimits {
  readonly rpm: number | null;
  readonly tpm: number | null;
}

/** What the limits need from a target's catalog entry. */
export interface TargetLimits {
  readonly contextLength: number | null;
  /** The Concurrency multiplier ("2x" -> 2), or null. */
  readonly concurrency: number | null;
}

/** Where a chat request goes: a shared endpoint or a tenant's deployment. */
export interface RouteTarget {
  readonly name: string;
  readonly endpointId: string;
  readonly deploymentId: string | null;
  readonly tenantId: string | null;
  readonly provider: string | null;
  /** `<provider>/<Name>` (`dedicatedModelName`, the console's form), or null without a provider. */
  readonly prefixedModel: string | null;
  /** The catalog entry's creation, in Unix seconds (`created` of `/models`; 0 when the snapshot lacks it). */
  readonly created: number;
  /** False when a deployment has no ready replica (the route exists, but answers 503). */
  readonly ready: boolean;
  /** A deployment that is stopped or failed: it takes no traffic until its owner acts (absent: it may serve). */
  readonly halted?: 'stopped' | 'failed';
  readonly upstreams: readonly ResolvedUpstream[];
  /** The catalog entry's context length and Concurrency (a deployment takes its endpoint's). */
  readonly limits: TargetLimits;
  /** Routing overrides (src/routing): the deployment's, else its catalog entry's; null: the node's defaults. */
  readonly routing: SnapshotRouting | null;
  /** A deployment's targetConcurrency: requests one replica takes at once (absent: the node's base x Concurrency). */
  readonly replicaConcurrency?: number | null;
}

export interface ResolvedKey {
  readonly id: string;
  readonly tenantId: string;
  /** The owning tenant's slug (a key whose tenant is not in the snapshot is not indexed at all). */
  readonly tenantSlug: string;
  /** Epoch ms, or Infinity for no expiry. */
  readonly expiresAtMs: number;
  /** The key's own limits, counted per key. */
  readonly limits: KeyRateLimits;
  /**
   * Its tenant's limits, counted over all the tenant's keys together (a member cannot multiply them by making
   * keys, nor lift them with a key's own limit). Where neither sets a limit, the node's default applies per key.
   */
  readonly tenantLimits: KeyRateLimits;
}

/** The immutable, indexed form of one snapshot; swapped as a whole. */
export interface ConfigView {
  readonly version: number;
  readonly keyByHash: ReadonlyMap<string, ResolvedKey>;
  /** Published endpoints offered on the shared surface, by Name. */
  readonly endpointByName: ReadonlyMap<string, RouteTarget>;
  /** Deployments by `${tenantSlug}\n${endpointName}`. */
  readonly deploymentByTenantAndName: ReadonlyMap<string, RouteTarget>;
  readonly tenants: ReadonlyMap<string, SnapshotTenant>;
  /** The published Name an unknown shared `model` most likely meant ("did you mean"), or null. */
  readonly suggestSharedModel: ModelSuggester;
  /** The OpenAI list body of shared models, serialised once. */
  readonly sharedModelsJson: string;
  /** Every upstream origin the snapshot references. */
  readonly origins: ReadonlySet<string>;
  /** Origins a tenant gave (external deployments): dialled only through the address guard. */
  readonly tenantOrigins: ReadonlySet<string>;
}

/** Key of `deploymentByTenantAndName`. */
export const deploymentKey = (tenantSlug: string, name: string): string => `${tenantSlug}\n${name}`;

function resolveUpstream(u: SnapshotUpstream): ResolvedUpstream | null {
  let url: URL;
  try {
    url = new URL(u.url);
  } catch {
    return null; // a bad URL in the snapshot must not take the node down; the route answers 503
  }
  return Object.freeze({
    id: u.id,
    kind: u.kind,
    origin: url.origin,
    chatPath: trimTrailingSlashes(url.pathname) + adapterFor(u.kind).chatPath,
    servedModel: u.servedModel,
    authorization: u.apiKey ? `Bearer ${u.apiKey}` : null,
  });
}

const resolveAll = (list: readonly SnapshotUpstream[]): ResolvedUpstream[] => list.map(resolveUpstream).filter((u): u is ResolvedUpstream => u !== null);

const positive = (n: number | null | undefined): number | null => (typeof n === 'number' && n > 0 ? n : null);

const NO_TARGET_LIMITS: TargetLimits = Object.freeze({ contextLength: null, concurrency: null });

const targetLimits = (e: SnapshotEndpoint): TargetLimits => Object.freeze({ contextLength: positive(e.contextLength), concurrency: positive(e.concurrency) });

const prefixedModel = (name: string, provider: string | null): string | null => {
  const prefixed = dedicatedModelName(name, provider);
  return prefixed === name ? null : prefixed;
};

/** Unix seconds of an ISO time; 0 when absent or unreadable. */
const unixSeconds = (iso: string | undefined): number => {
  const ms = iso === undefined ? Number.NaN : Date.parse(iso);
  return Number.isNaN(ms) ? 0 : Math.floor(ms / 1000);
};

function sharedTarget(e: SnapshotEndpoint, limits: TargetLimits): RouteTarget {
  const upstreams = resolveAll(e.upstreams);
  return Object.freeze({
    name: e.name,
    endpointId: e.id,
    deploymentId: null,
    tenantId: null,
    provider: e.provider,
    prefixedModel: prefixedModel(e.name, e.provider),
    created: unixSeconds(e.createdAt),
    ready: upstreams.length > 0,
    upstreams: Object.freeze(upstreams),
    limits,
    routing: e.routing ?? null,
  });
}

function deploymentTarget(d: SnapshotDeployment, limits: TargetLimits, entryRouting: SnapshotRouting | null, created: number): RouteTarget {
  const usable = d.state !== 'stopped' && d.state !== 'failed';
  const upstreams = usable ? resolveAll(d.replicas) : [];
  return Object.freeze({
    name: d.endpointName,
    endpointId: d.endpointId,
    deploymentId: d.id,
    tenantId: d.tenantId,
    provider: d.provider,
    prefixedModel: prefixedModel(d.endpointName, d.provider),
    created,
    ready: upstreams.length > 0,
    ...(usable ? {} : { halted: d.state as 'stopped' | 'failed' }),
    upstreams: Object.freeze(upstreams),
    limits,
    routing: d.routing !== undefined ? { ...entryRouting, ...d.routing } : entryRouting,
    replicaConcurrency: positive(d.targetConcurrency),
  });
}

/** Model object of the OpenAI list shape. */
export const modelObject = (name: string, provider: string | null, created = 0): Record<string, unknown> => ({
  id: name,
  object: 'model',
  created,
  owned_by: provider || 'infer',
});

/**
 * Builds the indexed view of a snapshot (O(size); runs on config changes, never per request). This is the one
 * place a snapshot is applied: routing, keys and the effective limits of every key and target.
 */
export function buildConfigView(s: ConfigSnapshot): ConfigView {
  const tenants = new Map(s.tenants.map((t) => [t.id, t] as const));
  const tenantLimits = new Map(s.tenants.map((t) => [t.id, Object.freeze({ rpm: positive(t.rpmLimit), tpm: positive(t.tpmLimit) })] as const));
  const keyByHash = new Map<string, ResolvedKey>();
  for (const k of s.keys) {
    // A key whose tenant is missing (deleted, or a snapshot out of step) fails closed: it is not indexed,
    // so it answers 401 invalid_api_key like an unknown key.
    const tenant = tenants.get(k.tenantId);
    if (tenant === undefined) continue;
    const expires = k.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(k.expiresAt);
    keyByHash.set(
      k.hash,
      Object.freeze({
        id: k.id,
        tenantId: k.tenantId,
        tenantSlug: tenant.slug,
        // An unparsable expiry fails closed.
        expiresAtMs: Number.isNaN(expires) ? 0 : expires,
        limits: Object.freeze({ rpm: positive(k.rpmLimit), tpm: positive(k.tpmLimit) }),
        tenantLimits: tenantLimits.get(tenant.id)!,
      }),
    );
  }
  // Every entry's limits, published or not: a deployment takes its endpoint's.
  const limitsByEndpoint = new Map(s.endpoints.map((e) => [e.id, targetLimits(e)] as const));
  const routingByEndpoint = new Map(s.endpoints.map((e) => [e.id, e.routing ?? null] as const));
  const createdByEndpoint = new Map(s.endpoints.map((e) => [e.id, unixSeconds(e.createdAt)] as const));
  const endpointByName = new Map<string, RouteTarget>();
  const origins = new Set<string>();
  const listed: Record<string, unknown>[] = [];
  for (const e of s.endpoints) {
    if (!e.published || !e.offeredShared) continue;
    const target = sharedTarget(e, limitsByEndpoint.get(e.id)!);
    endpointByName.set(e.name, target);
    listed.push(modelObject(e.name, e.provider, target.created));
    for (const u of target.upstreams) origins.add(u.origin);
  }
  const deploymentByTenantAndName = new Map<string, RouteTarget>();
  const tenantOrigins = new Set<string>();
  for (const d of s.deployments) {
    const target = deploymentTarget(
      d,
      limitsByEndpoint.get(d.endpointId) ?? NO_TARGET_LIMITS,
      routingByEndpoint.get(d.endpointId) ?? null,
      createdByEndpoint.get(d.endpointId) ?? 0,
    );
    deploymentByTenantAndName.set(deploymentKey(d.tenantSlug, d.endpointName), target);
    for (const u of target.upstreams) origins.add(u.origin);
    for (const u of d.replicas) if (u.addressPolicy === 'public' && URL.canParse(u.url)) tenantOrigins.add(new URL(u.url).origin);
  }
  return Object.freeze({
    version: s.version,
    keyByHash,
    endpointByName,
    deploymentByTenantAndName,
    tenants,
    suggestSharedModel: createModelSuggester(
      [...endpointByName.values()].map((t) => ({
        name: t.name,
        provider: t.provider,
        servedModels: t.upstreams.map((u) => u.servedModel),
      })),
    ),
    sharedModelsJson: JSON.stringify({ object: 'list', data: listed }),
    origins,
    tenantOrigins,
  });
}
