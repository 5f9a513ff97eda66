import { builder } from '../../graphql/builder.ts';
import { actorOf } from '../access/principal.ts';
import { keyRevokeLimit, requireTenantRole } from '../access/access.ts';
import { TenantRef } from '../tenants/tenants.graphql.ts';
import { createApiKey, listApiKeys, revokeApiKey, type ApiKey } from './keys.service.ts';

type KeyShape = Pick<ApiKey, 'id' | 'name' | 'prefix' | 'createdAt' | 'expiresAt'> & Partial<Pick<ApiKey, 'lastUsedAt' | 'revokedAt'>>;

const ApiKeyRef = builder.objectRef<KeyShape>('ApiKey').implement({
  description: 'An inference API key (serves shared and dedicated modes). The secret is never shown again after creation.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    prefix: t.exposeString('prefix', { description: 'The first characters of the secret, to recognise it.' }),
    createdAt: t.field({ type: 'DateTime', resolve: (k) => k.createdAt }),
    lastUsedAt: t.field({ type: 'DateTime', nullable: true, resolve: (k) => k.lastUsedAt ?? null }),
    expiresAt: t.field({ type: 'DateTime', nullable: true, resolve: (k) => k.expiresAt }),
    revokedAt: t.field({ type: 'DateTime', nullable: true, resolve: (k) => k.revokedAt ?? null }),
  }),
});

const CreatedApiKey = builder.objectRef<{ key: KeyShape; secret: string }>('CreatedApiKey').implement({
  fields: (t) => ({
    key: t.field({ type: ApiKeyRef, resolve: (c) => c.key }),
    secret: t.exposeString('secret', { description: 'The whole key: shown this once, stored only as a hash. Send it as `Authorization: Bearer …`.' }),
  }),
});

builder.objectField(TenantRef, 'apiKeys', (t) =>
  t.field({
    type: [ApiKeyRef],
    description: "The tenant's inference keys, newest first (revoked ones flagged by revokedAt).",
    resolve: (tenant, _args, ctx) => {
      requireTenantRole(ctx.principal, tenant.id);
      return listApiKeys(ctx.db, tenant.id);
    },
  }),
);

builder.mutationFields((t) => ({
  createApiKey: t.field({
    type: CreatedApiKey,
    description: 'Members: issues an inference key for the tenant; the secret is returned this once.',
    args: {
      tenantId: t.arg.id({ required: true }),
      name: t.arg.string({ required: true }),
      expiresAt: t.arg({ type: 'DateTime' }),
    },
    resolve: (_root, args, ctx) => {
      const tenantId = String(args.tenantId);
      const p = ctx.principal;
      requireTenantRole(p, tenantId, 'member');
      return createApiKey(ctx.db, {
        tenantId,
        name: args.name,
        expiresAt: args.expiresAt ?? null,
        createdBy: p.kind === 'anonymous' ? null : p.userId,
        actor: actorOf(p),
      });
    },
  }),
  revokeApiKey: t.field({
    type: ApiKeyRef,
    description: "Revokes a tenant's key: members their own keys, owners any (data-plane nodes drop it within a second).",
    args: { tenantId: t.arg.id({ required: true }), id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => {
      const tenantId = String(args.tenantId);
      const onlyCreatedBy = keyRevokeLimit(ctx.principal, tenantId);
      return revokeApiKey(ctx.db, { tenantId, keyId: String(args.id), onlyCreatedBy, actor: actorOf(ctx.principal) });
    },
  }),
}));
