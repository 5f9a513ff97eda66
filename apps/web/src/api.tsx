import { sortByName } from './lib/sort.ts';
import { trpc, type RouterInputs, type RouterOutputs } from './trpc.tsx';

/** The procedures the console calls, with the router's own input and output types. */
export type CatalogEntry = RouterOutputs['catalog']['list'][number];
/** An entry as platform admins edit it: with its detailed intro. */
export type AdminCatalogEntry = RouterOutputs['catalog']['admin']['list'][number];
export type Facets = RouterOutputs['catalog']['facets'];
export type PlatformUrls = RouterOutputs['platform']['urls'];
export type Me = NonNullable<RouterOutputs['auth']['me']>;
export type ApiKey = RouterOutputs['keys']['list'][number];
export type CreatedKey = RouterOutputs['keys']['create'];
export type AdminToken = RouterOutputs['adminTokens']['list'][number];
export type CreatedAdminToken = RouterOutputs['adminTokens']['create'];
export type Deployment = RouterOutputs['deployments']['list'][number];
export type UsageSummary = RouterOutputs['usage']['summary'];
export type Tenant = RouterOutputs['tenants']['all'][number];
export type Member = RouterOutputs['tenants']['members']['list'][number];
export type TenantInvitation = RouterOutputs['tenants']['invitations']['list'][number];
export type MyInvitation = RouterOutputs['tenants']['invitations']['mine'][number];
export type AuditRow = RouterOutputs['audit']['list'][number];
export type EntryPatch = Omit<RouterInputs['catalog']['update'], 'id'>;
export type Autoscaling = NonNullable<RouterInputs['deployments']['scale']['autoscaling']>;
export type ColdStarts = RouterOutputs['deployments']['coldStarts'];
export type Upstream = RouterOutputs['catalog']['upstreams']['list'][number];
export type UpstreamInput = RouterInputs['catalog']['upstreams']['add'];

export const api = {
  catalog: {
    /** Published entries by name, case-insensitively (the database's own order puts every capital first). */
    list: async (input: { provider?: string; tag?: string; useCase?: string; search?: string }) => sortByName(await trpc.catalog.list.query(input)),
    byName: (name: string) => trpc.catalog.byName.query({ name }),
    facets: () => trpc.catalog.facets.query(),
    adminList: () => trpc.catalog.admin.list.query({}),
    create: (input: EntryPatch & { name: string }) => trpc.catalog.create.mutate(input),
    update: (id: string, patch: EntryPatch) => trpc.catalog.update.mutate({ id, ...patch }),
    publish: (id: string) => trpc.catalog.publish.mutate({ id }),
    unpublish: (id: string) => trpc.catalog.unpublish.mutate({ id }),
    observedColdStart: (id: string) => trpc.catalog.observedColdStart.query({ id }),
    upstreams: (entryId: string) => trpc.catalog.upstreams.list.query({ entryId }),
    addUpstream: (input: UpstreamInput) => trpc.catalog.upstreams.add.mutate(input),
    removeUpstream: (upstreamId: string) => trpc.catalog.upstreams.remove.mutate({ upstreamId }),
  },
  platform: { urls: () => trpc.platform.urls.query() },
  auth: {
    me: () => trpc.auth.me.query(),
    login: (email: string, password: string) => trpc.auth.login.mutate({ email, password }),
    logout: () => trpc.auth.logout.mutate(),
  },
  keys: {
    list: (tenantId: string) => trpc.keys.list.query({ tenantId }),
    create: (tenantId: string, name: string, expiresAt: string | null) => trpc.keys.create.mutate({ tenantId, name, ...(expiresAt ? { expiresAt } : {}) }),
    revoke: (tenantId: string, keyId: string) => trpc.keys.revoke.mutate({ tenantId, keyId }),
  },
  adminTokens: {
    /** With a tenant: that tenant's tokens (owners); without: every token (platform admins). */
    list: (tenantId?: string) => trpc.adminTokens.list.query(tenantId ? { tenantId } : {}),
    /** `tenantId` null: a platform-wide token (platform admins only). */
    create: (name: string, tenantId: string | null, expiresAt: string | null) =>
      trpc.adminTokens.create.mutate({ name, tenantId, ...(expiresAt ? { expiresAt } : {}) }),
    revoke: (tokenId: string, tenantId?: string) => trpc.adminTokens.revoke.mutate({ tokenId, ...(tenantId ? { tenantId } : {}) }),
  },
  deployments: {
    list: (tenantId: string) => trpc.deployments.list.query({ tenantId }),
    get: (tenantId: string, deploymentId: string) => trpc.deployments.get.query({ tenantId, deploymentId }),
    create: (tenantId: string, entryName: string, minReplicas: number, maxReplicas: number, autoscaling?: Autoscaling) =>
      trpc.deployments.create.mutate({ tenantId, entryName, minReplicas, maxReplicas, ...(autoscaling ? { autoscaling } : {}) }),
    scale: (tenantId: string, deploymentId: string, minReplicas: number, maxReplicas: number, autoscaling?: Autoscaling) =>
      trpc.deployments.scale.mutate({ tenantId, deploymentId, minReplicas, maxReplicas, ...(autoscaling ? { autoscaling } : {}) }),
    wake: (tenantId: string, deploymentId: string) => trpc.deployments.wake.mutate({ tenantId, deploymentId }),
    gpuSeconds: (tenantId: string, deploymentId: string, from: string, to: string) => trpc.deployments.gpuSeconds.query({ tenantId, deploymentId, from, to }),
    coldStarts: (tenantId: string, deploymentId: string) => trpc.deployments.coldStarts.query({ tenantId, deploymentId, limit: 20 }),
    stop: (tenantId: string, deploymentId: string) => trpc.deployments.stop.mutate({ tenantId, deploymentId }),
    start: (tenantId: string, deploymentId: string) => trpc.deployments.start.mutate({ tenantId, deploymentId }),
    delete: (tenantId: string, deploymentId: string) => trpc.deployments.delete.mutate({ tenantId, deploymentId }),
  },
  usage: {
    summary: (tenantId: string, from: string, to: string) => trpc.usage.summary.query({ tenantId, from, to }),
  },
  tenants: {
    all: () => trpc.tenants.all.query(),
    create: (slug: string, name: string, ownerEmail?: string) => trpc.tenants.create.mutate({ slug, name, ...(ownerEmail ? { ownerEmail } : {}) }),
    members: (tenantId: string) => trpc.tenants.members.list.query({ tenantId }),
    /** Sends an invitation: the person joins when they accept it (the reply is the same whether or not they have an account). */
    addMember: (tenantId: string, email: string, role: 'owner' | 'member') => trpc.tenants.members.add.mutate({ tenantId, email, role }),
    invitations: (tenantId: string) => trpc.tenants.invitations.list.query({ tenantId }),
    revokeInvitation: (tenantId: string, invitationId: string) => trpc.tenants.invitations.revoke.mutate({ tenantId, invitationId }),
    removeMember: (tenantId: string, userId: string) => trpc.tenants.members.remove.mutate({ tenantId, userId }),
    setLimits: (tenantId: string, rpmLimit: number | null, tpmLimit: number | null) => trpc.tenants.setLimits.mutate({ tenantId, rpmLimit, tpmLimit }),
  },
  /** Invitations addressed to the logged-in user. */
  invitations: {
    mine: () => trpc.tenants.invitations.mine.query(),
    accept: (invitationId: string) => trpc.tenants.invitations.accept.mutate({ invitationId }),
    decline: (invitationId: string) => trpc.tenants.invitations.decline.mutate({ invitationId }),
  },
  audit: {
    list: (input: { tenantId?: string; limit?: number; before?: number; action?: string }) => trpc.audit.list.query(input),
  },
};
