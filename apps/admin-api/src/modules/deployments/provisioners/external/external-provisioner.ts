import { Agent, buildConnector, request } from 'undici';
import type { RuntimeKind } from '@infer/shared';
import { trimTrailingSlashes } from '@infer/shared';
import { AddressRefusedError, createAddressGuard, guardConnector, type AddressGuard } from '@infer/shared/address-guard';
import type { Provisioner, ReplicaRef, ReplicaSpec, StartedReplica } from '../provisioner.ts';
import { parseRuntimeLoad, type RuntimeLoad } from '../../runtime-metrics.ts';

export interface ExternalProvisionerOptions {
  /** Per-probe timeout (default 5 s). */
  readonly timeoutMs?: number;
  /** Runtime kind recorded for replicas (default 'openai': any OpenAI-compatible server). */
  readonly runtimeKind?: RuntimeKind;
  /**
   * Decides which addresses probes may reach (default: public addresses only). The URL is a tenant's, so
   * every probe connection resolves through it and is pinned to the addresses it checked.
   */
  readonly addressGuard?: AddressGuard;
}

/** `http://host:port/v1/` -> `http://host:port` (replica URLs are stored without `/v1`). */
export function normaliseRuntimeUrl(url: string): string {
  return trimTrailingSlashes(url.trim()).replace(/\/v1$/, '');
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

/** A runtime someone else runs: one replica, the URL given; nothing to start or stop but a health check. */
export function createExternalProvisioner(opts: ExternalProvisionerOptions = {}): Provisioner {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const guard = opts.addressGuard ?? createAddressGuard();
  // No `maxRedirections` and no redirect interceptor: a 3xx is an answer (not 2xx, so unhealthy), never followed.
  const dispatcher = new Agent({
    connect: guardConnector(guard, buildConnector({ timeout: timeoutMs, lookup: guard.lookup })),
    keepAliveTimeout: 1_000,
  });

  /** GET with a timeout; null on any transport failure (refused address included). Reads at most 1 MiB. */
  const get = async (url: string, signal?: AbortSignal, seen?: { refusal?: AddressRefusedError }, limitMs = timeoutMs): Promise<Answer | null> => {
    const timeout = AbortSignal.timeout(limitMs);
    try {
      const res = await request(url, { method: 'GET', dispatcher, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > 1 << 20) {
          res.body.destroy();
          break;
        }
        chunks.push(chunk);
      }
      return { status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') };
    } catch (err) {
      if (err instanceof AddressRefusedError && seen) seen.refusal = err;
      return null;
    }
  };

  const ok = (a: Answer | null): boolean => a !== null && a.status >= 200 && a.status < 300;
  const healthy = async (url: string, signal?: AbortSignal, seen?: { refusal?: AddressRefusedError }): Promise<boolean> =>
    ok(await get(`${url}/health`, signal, seen)) || ok(await get(`${url}/v1/models`, signal, seen));

  /** The model the runtime serves: the expected one if listed, else its only model, else the expected one. */
  const detectServedModel = async (url: string, spec: ReplicaSpec): Promise<string> => {
    const answer = await get(`${url}/v1/models`);
    if (!answer || !ok(answer)) return spec.servedModel;
    try {
      const body = JSON.parse(answer.body) as { data?: { id?: unknown }[] };
      const ids = (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === 'string');
      if (ids.includes(spec.servedModel)) return spec.servedModel;
      if (ids.includes(spec.entryName)) return spec.entryName;
      return ids.length === 1 && ids[0] ? ids[0] : spec.servedModel;
    } catch {
      return spec.servedModel;
    }
  };

  return Object.freeze({
    kind: 'external' as const,
    billsGpuTime: false,
    outlivesControlPlane: true,
    async start(spec: ReplicaSpec, signal?: AbortSignal): Promise<StartedReplica> {
      if (!spec.externalUrl) throw new Error('the external provisioner needs a URL');
      const url = normaliseRuntimeUrl(spec.externalUrl);
      const seen: { refusal?: AddressRefusedError } = {};
      if (!(await healthy(url, signal, seen))) {
        // Shown to the tenant as the deployment's lastError: the reason, never anything the address answered.
        if (seen.refusal) throw new Error(`the runtime at ${url} is not reachable: ${seen.refusal.message}`);
        throw new Error(`the runtime at ${url} answered neither /health nor /v1/models`);
      }
      return { url, kind: opts.runtimeKind ?? 'openai', servedModel: await detectServedModel(url, spec) };
    },
    async stop(_replica: ReplicaRef): Promise<void> {},
    health: (replica: ReplicaRef) => healthy(replica.url),
    /** The tenant's runtime gauges, through the guard like every other request to it (a 3xx or refusal: null). */
    async runtimeLoad(replica: ReplicaRef, limitMs: number): Promise<RuntimeLoad | null> {
      const answer = await get(`${replica.url}/metrics`, undefined, undefined, limitMs);
      return answer && ok(answer) ? parseRuntimeLoad(answer.body) : null;
    },
    async close(): Promise<void> {
      await dispatcher.close();
    },
  });
}
