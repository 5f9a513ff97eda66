export { buildAdminApp } from './app.ts';
export type { AdminAppOptions } from './app.ts';
export { loadEnv } from './env.ts';
export type { AdminEnv } from './env.ts';
export type { Db, DbKind } from './db.ts';
export { ServiceError } from './errors.ts';
export type { ServiceErrorCode } from './errors.ts';
export { seedDemo } from './seed.ts';
export type { SeedResult } from './seed.ts';

export { buildSnapshot, recordChange, currentVersion, deltasSince, readDeltasAfter, toDelta, OUTBOX_CHANNEL } from './modules/snapshots/snapshots.service.ts';
export { withTransaction, outboxSignal } from './modules/snapshots/outbox.ts';
export { createChangeHub } from './modules/snapshots/change-hub.ts';
export type { ChangeHub, ChangeHubOptions, DeltaListener } from './modules/snapshots/change-hub.ts';

export {
  createEntry,
  updateEntry,
  setPublished,
  addUpstream,
  removeUpstream,
  listUpstreams,
  listEntries,
  getEntryByName,
  getEntryById,
  listFacets,
} from './modules/catalog/catalog.service.ts';
export type { CatalogEntry, Upstream, EntryFilter, CreateEntryInput, UpdateEntryInput, AddUpstreamInput } from './modules/catalog/catalog.service.ts';
export { toCatalogView } from './modules/catalog/catalog-view.ts';
export type { CatalogView } from './modules/catalog/catalog-view.ts';

export {
  createTenant,
  getTenantBySlug,
  getTenantById,
  listTenants,
  setTenantLimits,
  addMember,
  listTenantsOfUser,
  getMembership,
} from './modules/tenants/tenants.service.ts';
export type { Tenant, Membership, CreateTenantInput } from './modules/tenants/tenants.service.ts';

export { createUser, getUserById, verifyCredentials, hashPassword, verifyPassword, setPassword } from './modules/auth/auth.service.ts';
export type { User, CreateUserInput } from './modules/auth/auth.service.ts';

export { createApiKey, revokeApiKey, listApiKeys } from './modules/keys/keys.service.ts';
export type { ApiKey, CreatedApiKey, CreateApiKeyInput } from './modules/keys/keys.service.ts';

export {
  createDeployment,
  setDeploymentState,
  registerReplica,
  setReplicaState,
  removeReplica,
  listReplicas,
  deployEndpoint,
  scaleDeployment,
  stopDeployment,
  startDeployment,
  deleteDeployment,
  listDeployments,
  getDeployment,
  MAX_REPLICAS,
} from './modules/deployments/deployments.service.ts';
export type {
  Deployment,
  Replica,
  CreateDeploymentInput,
  DeploymentView,
  ReplicaView,
  DeployEndpointInput,
  ScaleDeploymentInput,
  DeploymentRef,
} from './modules/deployments/deployments.service.ts';
export { createDeploymentsContext, createDefaultProvisioners } from './modules/deployments/deployments-context.ts';
export type { DeploymentsContext, DeploymentsContextOptions } from './modules/deployments/deployments-context.ts';
export { createLocalProvisioner } from './modules/deployments/provisioners/local/local-provisioner.ts';
export type { LocalProvisionerOptions } from './modules/deployments/provisioners/local/local-provisioner.ts';
export { createExternalProvisioner } from './modules/deployments/provisioners/external/external-provisioner.ts';
export { provisionerKinds } from './modules/deployments/provisioners/provisioner.ts';
export type { Provisioner, ProvisionerKind, Provisioners, ReplicaSpec, StartedReplica } from './modules/deployments/provisioners/provisioner.ts';

export { ingestUsage, summariseUsage } from './modules/usage/usage.service.ts';
export type { IngestResult, UsageSummary, UsageTotals } from './modules/usage/usage.service.ts';
export { listAudit, writeAudit } from './modules/audit/audit.service.ts';
export type { Actor, AuditRecord } from './modules/audit/audit.service.ts';

export { resolvePrincipal, resolveCaller } from './modules/auth/resolve-principal.ts';
export type { CallerCredentials, ResolvedCaller } from './modules/auth/resolve-principal.ts';
export {
  createSession,
  validateSession,
  invalidateSession,
  invalidateUserSessions,
  deleteExpiredSessions,
  sessionCookie,
  blankSessionCookie,
  readSessionToken,
  SESSION_COOKIE,
  SESSION_TTL_MS,
} from './modules/auth/sessions.ts';
export type { Session, ValidatedSession } from './modules/auth/sessions.ts';
export { login, getUserByEmail } from './modules/auth/auth.service.ts';
export { createLoginThrottle } from './modules/auth/login-throttle.ts';
export type { LoginThrottle } from './modules/auth/login-throttle.ts';
export { isSameOrigin, normaliseOrigins } from './modules/auth/origin.ts';
export { createAdminToken, issueAdminToken, listAdminTokens, revokeAdminToken, authenticateAdminToken } from './modules/auth/admin-tokens.service.ts';
export type { AdminToken, CreatedAdminToken, CreateAdminTokenInput, IssueAdminTokenInput } from './modules/auth/admin-tokens.service.ts';
export { isPlatformAdmin, roleIn, requireAuthenticated, requireTenantRole, requirePlatformAdmin, keyRevokeLimit } from './modules/access/access.ts';
export { ANONYMOUS, actorOf } from './modules/access/principal.ts';
export type { Principal, TenantRole } from './modules/access/principal.ts';
export { listMembers, listCallerTenants, setMemberRole, removeMember } from './modules/tenants/tenants.service.ts';
export {
  inviteMember,
  createInvitation,
  listTenantInvitations,
  listMyInvitations,
  answerInvitation,
  revokeInvitation,
} from './modules/tenants/invitations.service.ts';
export type { InvitationSent, TenantInvitation, MyInvitation, InvitationAnswer, InvitationRef } from './modules/tenants/invitations.service.ts';
export type { Member } from './modules/tenants/tenants.service.ts';

export { createContextInner } from './trpc/context.ts';
export type { TrpcContext, PublicUrls } from './trpc/context.ts';
export { appRouter } from './trpc/root.ts';
export type { AppRouter } from './trpc/root.ts';
