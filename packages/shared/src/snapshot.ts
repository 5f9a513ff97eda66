import { z } from 'zod';

/** Runtime kinds an upstream can speak; all are OpenAI-compatible at /v1/chat/completions. */
export const runtimeKinds = ['sim', 'vllm', 'sglang', 'tgi', 'ollama', 'openai'] as const;
export type RuntimeKind = (typeof runtimeKinds)[number];

export const upstreamSchema = z.object({
  id: z.string(),
  /** Base URL of the runtime, without /v1 (e.g. http://127.0.0.1:8001). */
  url: z.string(),
  kind: z.enum(runtimeKinds),
  /** The model name the runtime serves; the data plane rewrites `model` to it and back. */
  servedModel: z.string(),
  /** Optional bearer the runtime expects (never logged). */
  apiKey: z.string().nullable(),
  /**
   * 'public': a tenant gave this address (external deployments), so nodes dial it only through the address
   * guard (public addresses, or the node's ALLOWED_PRIVATE_CIDRS). Absent or 'any': platform-owned.
   */
  addressPolicy: z.enum(['any', 'public']).optional(),
});
export type SnapshotUpstream = z.infer<typeof upstreamSchema>;

export const snapshotTenantSchema = z.object({
  id: z.string(),
  slug: z.string(),
  rpmLimit: z.number().int().nullable(),
  tpmLimit: z.number().int().nullable(),
});
export type SnapshotTenant = z.infer<typeof snapshotTenantSchema>;

export const snapshotKeySchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  /** SHA-256 hex of the whole secret. */
  hash: z.string(),
  prefix: z.string(),
  /** ISO time, or null for no expiry. */
  expiresAt: z.string().nullable(),
  rpmLimit: z.number().int().nullable(),
  tpmLimit: z.number().int().nullable(),
});
export type SnapshotKey = z.infer<typeof snapshotKeySchema>;

/**
 * How a data-plane node picks among a target's replicas (issue 12); every field optional, the node's
 * defaults (ROUTING_POLICY) fill the rest. A deployment's own setting overrides its catalog entry's.
 */
export const routingSchema = z.object({
  policy: z.enum(['scorer', 'least_in_flight', 'round_robin', 'random']).optional(),
  prefixWeight: z.number().min(0).optional(),
  queueWeight: z.number().min(0).optional(),
  kvWeight: z.number().min(0).optional(),
  /** Requests waiting on a replica, and its KV-cache use (0..1), at which it counts as saturated. */
  queueThreshold: z.number().int().min(1).optional(),
  kvThreshold: z.number().min(0).max(1).optional(),
});
export type SnapshotRouting = z.infer<typeof routingSchema>;

export const snapshotEndpointSchema = z.object({
  id: z.string(),
  name: z.string(),
  provider: z.string().nullable(),
  contextLength: z.number().int().nullable(),
  concurrency: z.number().nullable(),
  coldStartSeconds: z.number().nullable(),
  offeredShared: z.boolean(),
  offeredDedicated: z.boolean(),
  published: z.boolean(),
  /** USD per million tokens. */
  priceInputPerM: z.number().nullable(),
  priceOutputPerM: z.number().nullable(),
  /** Replicas serving the shared surface. */
  upstreams: z.array(upstreamSchema),
  routing: routingSchema.optional(),
  /** ISO time the entry was created (`created` in `/models`); absent from older control planes: 0 there. */
  createdAt: z.string().optional(),
});
export type SnapshotEndpoint = z.infer<typeof snapshotEndpointSchema>;

/** `scaling`: replicas are starting or draining toward `desiredReplicas`; `scaled_to_zero`: idle, no replica, wakes on demand. */
export const deploymentStates = ['pending', 'provisioning', 'running', 'scaling', 'scaled_to_zero', 'stopped', 'failed'] as const;
export type DeploymentState = (typeof deploymentStates)[number];

export const snapshotDeploymentSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  tenantSlug: z.string(),
  endpointId: z.string(),
  endpointName: z.string(),
  provider: z.string().nullable(),
  state: z.enum(deploymentStates),
  /** Replicas that take traffic; a draining replica leaves this list before it stops. */
  replicas: z.array(upstreamSchema),
  minReplicas: z.number().int().min(0).default(0),
  maxReplicas: z.number().int().min(0).default(1),
  /** Requests one replica should carry at once (resolved: never null). */
  targetConcurrency: z.number().int().min(1).default(1),
  desiredReplicas: z.number().int().min(0).default(0),
  /** The entry's stated Cold Start TTFT in seconds, for the hold deadline. */
  coldStartSeconds: z.number().nullable().default(null),
  /**
   * The entry's measured cold start in seconds (p95 of its recent observed cold starts; null until there are a
   * few): what a hold expects the boot to take, before the stated figure.
   */
  measuredColdStartSeconds: z.number().nullable().default(null),
  routing: routingSchema.optional(),
});
export type SnapshotDeployment = z.infer<typeof snapshotDeploymentSchema>;

export const configSnapshotSchema = z.object({
  version: z.number().int(),
  tenants: z.array(snapshotTenantSchema),
  keys: z.array(snapshotKeySchema),
  endpoints: z.array(snapshotEndpointSchema),
  deployments: z.array(snapshotDeploymentSchema),
});
export type ConfigSnapshot = z.infer<typeof configSnapshotSchema>;

/** One outbox row as sent to nodes: the entity's whole new state, or its removal. */
export const configDeltaSchema = z.discriminatedUnion('kind', [
  z.object({ version: z.number().int(), kind: z.literal('tenant'), id: z.string(), op: z.enum(['upsert', 'delete']), value: snapshotTenantSchema.nullable() }),
  z.object({ version: z.number().int(), kind: z.literal('key'), id: z.string(), op: z.enum(['upsert', 'delete']), value: snapshotKeySchema.nullable() }),
  z.object({
    version: z.number().int(),
    kind: z.literal('endpoint'),
    id: z.string(),
    op: z.enum(['upsert', 'delete']),
    value: snapshotEndpointSchema.nullable(),
  }),
  z.object({
    version: z.number().int(),
    kind: z.literal('deployment'),
    id: z.string(),
    op: z.enum(['upsert', 'delete']),
    value: snapshotDeploymentSchema.nullable(),
  }),
]);
export type ConfigDelta = z.infer<typeof configDeltaSchema>;
export type ConfigEntityKind = ConfigDelta['kind'];

/** Applies deltas in order to a snapshot, returning a new snapshot (the input is not changed). */
export function applyDeltas(snapshot: ConfigSnapshot, deltas: readonly ConfigDelta[]): ConfigSnapshot {
  const next: ConfigSnapshot = {
    version: snapshot.version,
    tenants: [...snapshot.tenants],
    keys: [...snapshot.keys],
    endpoints: [...snapshot.endpoints],
    deployments: [...snapshot.deployments],
  };
  for (const d of deltas) {
    if (d.version <= next.version) continue;
    const list = (d.kind === 'tenant' ? next.tenants : d.kind === 'key' ? next.keys : d.kind === 'endpoint' ? next.endpoints : next.deployments) as {
      id: string;
    }[];
    const i = list.findIndex((e) => e.id === d.id);
    if (d.op === 'delete' || d.value === null) {
      if (i >= 0) list.splice(i, 1);
    } else if (i >= 0) list[i] = d.value;
    else list.push(d.value);
    next.version = d.version;
  }
  return next;
}
