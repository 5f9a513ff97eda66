import { builder } from '../../graphql/builder.ts';
import { isPlatformAdmin } from '../access/access.ts';
import type { Principal } from '../access/principal.ts';
import { getUserById } from '../auth/auth.service.ts';
import { adminCreateTenant, adminListTenants, callerRoleIn, getCallerTenant, listCallerTenants, type Tenant } from './tenants.service.ts';

export const TenantRoleEnum = builder.enumType('TenantRole', {
  values: { OWNER: { value: 'owner' }, MEMBER: { value: 'member' } } as const,
});

/** A tenant; every field under it re-checks the caller's role in its service. */
export const TenantRef = builder.objectRef<Tenant>('Tenant').implement({
  description: 'A tenant: the <tenant> segment of dedicated URLs, owner of keys, deployments and usage.',
  fields: (t) => ({
    id: t.exposeID('id'),
    slug: t.exposeString('slug'),
    name: t.exposeString('name'),
    rpmLimit: t.exposeInt('rpmLimit', { nullable: true, description: 'Requests per minute; null: no limit.' }),
    tpmLimit: t.exposeInt('tpmLimit', { nullable: true, description: 'Tokens per minute; null: no limit.' }),
    createdAt: t.field({ type: 'DateTime', resolve: (x) => x.createdAt }),
    viewerRole: t.field({
      type: TenantRoleEnum,
      description: "The caller's role here (platform admins and platform tokens act as owners).",
      resolve: (x, _args, ctx) => callerRoleIn(ctx.principal, x.id),
    }),
  }),
});

interface ViewerShape {
  principal: Exclude<Principal, { kind: 'anonymous' }>;
}

const ViewerKind = builder.enumType('ViewerKind', {
  values: { USER: { value: 'user' }, ADMIN_TOKEN: { value: 'admin_token' } } as const,
});

const ViewerUser = builder.objectRef<{ id: string; email: string; displayName: string | null }>('ViewerUser').implement({
  fields: (t) => ({ id: t.exposeID('id'), email: t.exposeString('email'), displayName: t.exposeString('displayName', { nullable: true }) }),
});

const ViewerToken = builder.objectRef<{ id: string; tenantId: string | null }>('ViewerToken').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    tenantId: t.exposeID('tenantId', { nullable: true, description: 'The one tenant it manages; null: platform-wide.' }),
  }),
});

export const ViewerRef = builder.objectRef<ViewerShape>('Viewer').implement({
  description: 'The caller: a console user (session cookie) or an admin token (Bearer infa_…).',
  fields: (t) => ({
    kind: t.field({ type: ViewerKind, resolve: (v) => v.principal.kind }),
    isPlatformAdmin: t.boolean({ resolve: (v) => isPlatformAdmin(v.principal) }),
    user: t.field({
      type: ViewerUser,
      nullable: true,
      resolve: async (v, _args, ctx) => {
        const userId = v.principal.userId;
        if (!userId) return null;
        const user = await getUserById(ctx.db, userId);
        return user ? { id: user.id, email: user.email, displayName: user.displayName } : null;
      },
    }),
    token: t.field({
      type: ViewerToken,
      nullable: true,
      resolve: (v) => (v.principal.kind === 'admin_token' ? { id: v.principal.tokenId, tenantId: v.principal.tenantId } : null),
    }),
    tenants: t.field({
      type: [TenantRef],
      description: 'Tenants the caller belongs to (a tenant admin token: its tenant). Platform admins see every tenant with `tenants`.',
      resolve: (v, _args, ctx) => listCallerTenants(ctx.db, v.principal),
    }),
  }),
});

builder.queryFields((t) => ({
  viewer: t.field({
    type: ViewerRef,
    nullable: true,
    description: 'The caller; null when anonymous.',
    resolve: (_root, _args, ctx) => (ctx.principal.kind === 'anonymous' ? null : { principal: ctx.principal }),
  }),
  tenant: t.field({
    type: TenantRef,
    nullable: true,
    description: 'One tenant of the caller, by id or slug (a tenant the caller cannot see is "not found").',
    args: { id: t.arg.id(), slug: t.arg.string() },
    resolve: (_root, args, ctx) => getCallerTenant(ctx.db, ctx.principal, { id: args.id == null ? null : String(args.id), slug: args.slug }),
  }),
  tenants: t.field({
    type: [TenantRef],
    description: 'Platform admins: every tenant.',
    resolve: (_root, _args, ctx) => adminListTenants(ctx.db, ctx.principal),
  }),
}));

builder.mutationFields((t) => ({
  createTenant: t.field({
    type: TenantRef,
    description: 'Platform admins: creates a tenant.',
    args: {
      slug: t.arg.string({ required: true, description: 'Lowercase letters, digits and dashes; the <tenant> URL segment.' }),
      name: t.arg.string({ required: true }),
      rpmLimit: t.arg.int(),
      tpmLimit: t.arg.int(),
      ownerEmail: t.arg.string({
        description: 'Invited as the first owner: they join when they accept (the reply is the same whether or not the email has an account).',
      }),
    },
    resolve: (_root, args, ctx) =>
      adminCreateTenant(ctx.db, ctx.principal, {
        slug: args.slug,
        name: args.name,
        rpmLimit: args.rpmLimit ?? null,
        tpmLimit: args.tpmLimit ?? null,
        ...(args.ownerEmail ? { ownerEmail: args.ownerEmail } : {}),
      }),
  }),
}));
