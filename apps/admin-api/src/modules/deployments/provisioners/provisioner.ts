import type { RuntimeKind } from '@infer/shared';
import type { RuntimeLoad } from '../runtime-metrics.ts';

/**
 * The one list of provisioner kinds (rows, GraphQL enum, tRPC input). A `kubernetes` kind (Deployment +
 * Service of a vLLM image) plugs in here and implements `Provisioner`.
 */
export const provisionerKinds = ['local', 'external', 'kubernetes'] as const;
export type ProvisionerKind = (typeof provisionerKinds)[number];

/** What a provisioner needs to start one replica of a deployment. */
export interface ReplicaSpec {
  /** The replica row's id (names the replica in the GPU-time ledger and in logs). */
  readonly replicaId: string;
  readonly deploymentId: string;
  readonly tenantId: string;
  /** The catalog Name. */
  readonly entryName: string;
  /** The model name the runtime should serve (the data plane rewrites `model` to it). */
  readonly servedModel: string;
  /** The entry's Cold Start TTFT, if any. */
  readonly coldStartSeconds: number | null;
  /** The entry's Context Length, if any: the window the runtime must accept (runtime-sim's --max-context-length). */
  readonly contextLength?: number | null;
  /** The runtime URL the tenant or operator gave (external only). */
  readonly externalUrl: string | null;
}

/** A replica that is up and healthy; recorded as a ready replica row. */
export interface StartedReplica {
  /** Base URL without `/v1`. */
  readonly url: string;
  readonly kind: RuntimeKind;
  readonly servedModel: string;
  readonly pid?: number;
  readonly port?: number;
}

/** The fields of a replica row a provisioner reads. */
export interface ReplicaRef {
  readonly deploymentId: string;
  readonly url: string;
  readonly pid: number | null;
  readonly port: number | null;
}

/**
 * Starts and stops runtime replicas of one kind; the reconciler drives it (start deadline, retries,
 * draining, GPU-time ledger), so a provisioner only does start / stop / health.
 */
export interface Provisioner {
  readonly kind: ProvisionerKind;
  /** Whether its replicas run on the platform's GPUs (metered in GPU-seconds); false for external URLs. */
  readonly billsGpuTime: boolean;
  /**
   * Whether its replicas outlive the control-plane process and another one can take them over (Kubernetes pods,
   * tenant-given URLs: `health` answers for, and claims, a replica another process started; `stop` then stops it).
   * Such replicas are handed over, not stopped, at shutdown and when leadership is lost; the next leader adopts them.
   * Absent: they end with this process (local runtimes), which stops them.
   */
  readonly outlivesControlPlane?: boolean;
  /**
   * False while `health` answers "up" for a replica without having seen it (the API it would ask cannot be reached):
   * such a replica stays routed but is not adopted (nor billed) until it is seen. Absent: `health` always looks.
   */
  seen?(replica: ReplicaRef): boolean;
  /**
   * For replicas that outlive the control plane. True: this process stops acting for its replicas (a shutdown, or
   * leadership lost): replica counts are left as they are (a start it cancels leaves its replica coming up, for the
   * next leader's start to take), so a process that no longer leads never resizes what the leader runs. False: it
   * leads again.
   */
  handOver?(handedOver: boolean): void;
  /**
   * Starts one replica and resolves once it is healthy (the readiness callback: the replica joins the
   * routing snapshot then); rejects (having cleaned up) if it cannot or when `signal` aborts (the
   * reconciler's start deadline).
   */
  start(spec: ReplicaSpec, signal?: AbortSignal): Promise<StartedReplica>;
  /** Stops a replica; a replica this provisioner does not own is left alone. */
  stop(replica: ReplicaRef): Promise<void>;
  /** True while the replica can take traffic. */
  health(replica: ReplicaRef): Promise<boolean>;
  /**
   * The runtime's own load gauges, for provisioners whose replicas sit at tenant-given addresses: they
   * scrape through their address guard (no redirects, bounded body). Absent: the control plane GETs the
   * replica's `/metrics` itself (replicas the platform runs).
   */
  runtimeLoad?(replica: ReplicaRef, timeoutMs: number): Promise<RuntimeLoad | null>;
  /** Registers a callback for replicas that die on their own (so the reconciler can replace them). */
  onExit?(listener: (deploymentId: string) => void): void;
  /**
   * The deployment is gone: delete whatever the provisioner created for it beyond its replicas (the
   * Kubernetes Deployment and Service). Optional; called by the reconciler after the row disappears.
   */
  release?(deploymentId: string): Promise<void>;
  /** Deletes what belongs to deployments not in this list (deleted or stopped while no one watched). Optional; the reconciler's periodic sweep calls it. */
  sweep?(activeDeploymentIds: readonly string[]): Promise<void>;
  /** Stops everything it started (control-plane shutdown). */
  close?(): Promise<void>;
}

export type Provisioners = Readonly<Partial<Record<ProvisionerKind, Provisioner>>>;

/**
 * GET `url` of a replica the platform runs, with a timeout; true on a 2xx. A redirect is an answer (not
 * 2xx), never followed; the body is not read. Tenant-given addresses are probed by their provisioner.
 */
export async function probe(url: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  try {
    const timeout = AbortSignal.timeout(timeoutMs);
    const res = await fetch(url, { redirect: 'manual', signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    await res.body?.cancel().catch(() => undefined);
    return res.ok;
  } catch {
    return false;
  }
}
