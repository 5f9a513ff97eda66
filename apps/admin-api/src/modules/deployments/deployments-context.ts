import { createAddressGuard, type AddressGuard } from '@infer/shared/address-guard';
import type { Db } from '../../db.ts';
import { createExternalProvisioner, type ExternalProvisionerOptions } from './provisioners/external/external-provisioner.ts';
import { createLocalProvisioner, type LocalProvisionerOptions } from './provisioners/local/local-provisioner.ts';
import type { Provisioner, Provisioners } from './provisioners/provisioner.ts';
import { DEFAULT_REPLICA_BASE_CONCURRENCY } from './target-concurrency.ts';
import { createReconciler, type DeploymentLog, type Reconciler, type ReconcilerOptions } from './reconciler.ts';

/** What the deployment service needs; tRPC and GraphQL contexts carry one (the app builds it). */
export interface DeploymentsContext {
  readonly db: Db;
  readonly provisioners: Provisioners;
  readonly log: DeploymentLog;
  /** Whether tenants may register external runtimes on loopback or private addresses (development, tests). */
  readonly allowPrivateExternalUrls: boolean;
  /** Checks an external runtime's host at registration (resolves names; every address must be allowed). */
  readonly addressGuard: AddressGuard;
  readonly reconciler: Reconciler;
  /** Requests one replica carries at once before the data plane queues (REPLICA_BASE_CONCURRENCY); x the entry's Concurrency multiplier. */
  readonly replicaBaseConcurrency: number;
  /** Wake requests, so the autoscaler (when this process leads) acts at once rather than at its next tick. */
  readonly wakes: WakeSignal;
}

export interface WakeSignal {
  notify(deploymentId: string): void;
  subscribe(listener: (deploymentId: string) => void): () => void;
}

function createWakeSignal(): WakeSignal {
  const listeners = new Set<(deploymentId: string) => void>();
  return Object.freeze({
    notify(deploymentId: string): void {
      for (const l of listeners) l(deploymentId);
    },
    subscribe(listener: (deploymentId: string) => void): () => void {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  });
}

export interface DeploymentsContextOptions {
  readonly db: Db;
  readonly provisioners: Provisioners;
  readonly log?: DeploymentLog;
  readonly allowPrivateExternalUrls?: boolean;
  /** Operator allow-list: non-public CIDRs external runtimes may use anyway. */
  readonly allowedPrivateCidrs?: readonly string[];
  /** Overrides the guard built from the two options above (tests inject a resolver). */
  readonly addressGuard?: AddressGuard;
  readonly replicaBaseConcurrency?: number;
  readonly reconciler?: ReconcilerOptions;
}

const silent: DeploymentLog = Object.freeze({ info() {}, warn() {}, error() {} });

export function createDeploymentsContext(opts: DeploymentsContextOptions): DeploymentsContext {
  const log = opts.log ?? silent;
  return Object.freeze({
    db: opts.db,
    provisioners: opts.provisioners,
    log,
    allowPrivateExternalUrls: opts.allowPrivateExternalUrls ?? false,
    addressGuard: opts.addressGuard ?? createAddressGuard({ allowAll: opts.allowPrivateExternalUrls, allowedCidrs: opts.allowedPrivateCidrs }),
    reconciler: createReconciler({ db: opts.db, provisioners: opts.provisioners, log, options: opts.reconciler }),
    replicaBaseConcurrency: opts.replicaBaseConcurrency ?? DEFAULT_REPLICA_BASE_CONCURRENCY,
    wakes: createWakeSignal(),
  });
}

/** The embedded defaults: local runtime-sim processes and external URLs, plus Kubernetes when configured (see provisioners/kubernetes/from-env.ts). */
export function createDefaultProvisioners(
  opts: { local?: LocalProvisionerOptions; external?: ExternalProvisionerOptions; kubernetes?: Provisioner } = {},
): Provisioners {
  return Object.freeze({
    local: createLocalProvisioner(opts.local),
    external: createExternalProvisioner(opts.external),
    ...(opts.kubernetes ? { kubernetes: opts.kubernetes } : {}),
  });
}
