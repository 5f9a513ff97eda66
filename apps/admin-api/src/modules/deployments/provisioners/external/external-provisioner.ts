import type { RuntimeKind } from '@infer/shared';
import { probe, type Provisioner, type ReplicaRef, type ReplicaSpec, type StartedReplica } from '../provisioner.ts';

export interface ExternalProvisionerOptions {
  /** Per-probe timeout (default 5 s). */
  readonly timeoutMs?: number;
  /** Runtime kind recorded for replicas (default 'openai': any OpenAI-compatible server). */
  readonly runtimeKind?: RuntimeKind;
}

/** `http://host:port/v1/` -> `http://host:port` (replica URLs are stored without `/v1`). */
export function normaliseRuntimeUrl(url: string): string {
  return url.trim().replace(/\/+$/, '').replace(/\/v1$/, '');
}

async function healthy(url: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  return (await probe(`${url}/health`, timeoutMs, signal)) || probe(`${url}/v1/models`, timeoutMs, signal);
}

/** The model the runtime serves: the expected one if listed, else its only model, else the expected one. */
async function detectServedModel(url: string, spec: ReplicaSpec, timeoutMs: number): Promise<string> {
  try {
    const res = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return spec.servedModel;
    const body = (await res.json()) as { data?: { id?: unknown }[] };
    const ids = (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === 'string');
    if (ids.includes(spec.servedModel)) return spec.servedModel;
    if (ids.includes(spec.entryName)) return spec.entryName;
    return ids.length === 1 && ids[0] ? ids[0] : spec.servedModel;
  } catch {
    return spec.servedModel;
  }
}

/** A runtime someone else runs: one replica, the URL given; nothing to start or stop but a health check. */
export function createExternalProvisioner(opts: ExternalProvisionerOptions = {}): Provisioner {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  return Object.freeze({
    kind: 'external' as const,
    async start(spec: ReplicaSpec, signal?: AbortSignal): Promise<StartedReplica> {
      if (!spec.externalUrl) throw new Error('the external provisioner needs a URL');
      const url = normaliseRuntimeUrl(spec.externalUrl);
      if (!(await healthy(url, timeoutMs, signal))) throw new Error(`the runtime at ${url} answered neither /health nor /v1/models`);
      return { url, kind: opts.runtimeKind ?? 'openai', servedModel: await detectServedModel(url, spec, timeoutMs) };
    },
    async stop(_replica: ReplicaRef): Promise<void> {},
    health: (replica: ReplicaRef) => healthy(replica.url, timeoutMs),
  });
}
