export { buildAdminApp } from './app.ts';
export type { AdminAppOptions } from './app.ts';
export { loadEnv } from './env.ts';
export type { AdminEnv } from './env.ts';
export type { Db, DbKind } from './db.ts';
export { ServiceError } from './errors.ts';
export type { ServiceErrorCode } from './errors.ts';
export { seedDemo } from './seed.ts';
export type { SeedResult } from './seed.ts';

export {
  buildSnapshot, recordChange, currentVersion, deltasSince, readDeltasAfter, toDelta, OUTBOX_CHANNEL,
} from './modules/snapshots/snapshots.service.ts';
export { withTransaction, outboxSignal } from './modules/snapshots/outbox.ts';
export { createChangeHub } from './modules/snapshots/change-hub.ts';
export type { ChangeHub, ChangeHubOptions, DeltaListener } from './modules/snapshots/change-hub.ts';

export {
  createEntry, updateEntry, setPublished, addUpstream, removeUpstream, listUpstreams, listEntries, getEntryByName,
  getEntryById, listFacets,
} from './modules/catalog/catalog.service.ts';
export type { CatalogEntry, Upstream, EntryFilter, CreateEntryInput, UpdateEntryInput, AddUpstreamInput } from './modules/catalog/catalog.service.ts';
export { toCatalogView } from './modules/catalog/catalog-view.ts';
export type { CatalogView } from './modules/catalog/catalog-view.ts';

export {
  createTenant, getTenantBySlug, getTenantById, listTenants, setTenantLimits, addMember, listTenantsOfUser, getMembership,
} from './modules/tenants/tenants.service.ts';
export type { Tenant, Membership, CreateTenantInput } from './modules/tenants/tenants.service.ts';

export { createUser, getUserById, verifyCredentials, hashPassword, verifyPassword } from './modules/auth/auth.service.ts';
export type { User, CreateUserInput } from './modules/auth/auth.service.ts';

export { createApiKey, revokeApiKey, listApiKeys } from './modules/keys/keys.service.ts';
export type { ApiKey, CreatedApiKey, CreateApiKeyInput } from './modules/keys/keys.service.ts';

export {
  createDeployment, setDeploymentState, registerReplica, setReplicaState, removeReplica, deleteDeployment,
  listDeployments, getDeployment, listReplicas, provisioners,
} from './modules/deployments/deployments.service.ts';
export type { Deployment, Replica, Provisioner, CreateDeploymentInput } from './modules/deployments/deployments.service.ts';

export { ingestUsage, summariseUsage } from './modules/usage/usage.service.ts';
export type { IngestResult, UsageSummary, UsageTotals } from './modules/usage/usage.service.ts';
export type { Actor } from './modules/audit/audit.service.ts';

export { createContextInner } from './trpc/context.ts';
export type { TrpcContext, PublicUrls } from './trpc/context.ts';
export { appRouter } from './trpc/root.ts';
export type { AppRouter } from './trpc/root.ts';
