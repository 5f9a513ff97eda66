import type { Db } from '../../db.ts';
import { createExternalProvisioner, type ExternalProvisionerOptions } from './provisioners/external/external-provisioner.ts';
import { createLocalProvisioner, type LocalProvisionerOptions } from './provisioners/local/local-provisioner.ts';
import type { Provisioners } from './provisioners/provisioner.ts';
import { createReconciler, type DeploymentLog, type Reconciler } from './reconciler.ts';

/** What the deployment service needs; tRPC and GraphQL contexts carry one (the app builds it). */
export interface DeploymentsContext {
  readonly db: Db;
  readonly provisioners: Provisioners;
  readonly log: DeploymentLog;
  /** Whether tenants may register external runtimes on loopback or private addresses (platform admins always may). */
  readonly allowPrivateExternalUrls: boolean;
  readonly reconciler: Reconciler;
}

export interface DeploymentsContextOptions {
  readonly db: Db;
  readonly provisioners: Provisioners;
  readonly log?: DeploymentLog;
  readonly allowPrivateExternalUrls?: boolean;
}

const silent: DeploymentLog = Object.freeze({ info() {}, warn() {}, error() {} });

export function createDeploymentsContext(opts: DeploymentsContextOptions): DeploymentsContext {
  const log = opts.log ?? silent;
  return Object.freeze({
    db: opts.db,
    provisioners: opts.provisioners,
    log,
    allowPrivateExternalUrls: opts.allowPrivateExternalUrls ?? false,
    reconciler: createReconciler({ db: opts.db, provisioners: opts.provisioners, log }),
  });
}

/** The embedded defaults: local runtime-sim processes and external URLs. */
export function createDefaultProvisioners(
  opts: { local?: LocalProvisionerOptions; external?: ExternalProvisionerOptions } = {},
): Provisioners {
  return Object.freeze({ local: createLocalProvisioner(opts.local), external: createExternalProvisioner(opts.external) });
}
