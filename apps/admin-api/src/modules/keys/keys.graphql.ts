import { builder } from '../../graphql/builder.ts';
import { TenantRef } from '../tenants/tenants.graphql.ts';
import { issueApiKey, listTenantApiKeys, revokeTenantApiKey, type ApiKey } from './keys.service.ts';

type KeyShape = Pick<ApiKey, 'id' | 'name' | 'prefix' | 'createdAt' | 'expiresAt' | 'rpmLimit' | 'tpmLimit'> &
  Partial<Pick<ApiKey, 'lastUsedAt' | 'revokedAt'>>;

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
    rpmLimit: t.int({ nullable: true, description: "Requests per minute for this key; null: only the tenant's limit.", resolve: (k) => k.rpmLimit }),
    tpmLimit: t.int({ nullable: true, description: "Tokens per minute for this key; null: only the tenant's limit.", resolve: (k) => k.tpmLimit }),
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
    resolve: (tenant, _args, ctx) => listTenantApiKeys(ctx.db, ctx.principal, tenant.id),
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
      rpmLimit: t.arg.int({ description: "Requests per minute for this key (1 to 1000000000); absent or null: only the tenant's limit." }),
      tpmLimit: t.arg.int({ description: "Tokens per minute for this key (1 to 1000000000); absent or null: only the tenant's limit." }),
    },
    resolve: (_root, args, ctx) =>
      issueApiKey(ctx.db, ctx.principal, {
        tenantId: String(args.tenantId),
        name: args.name,
        expiresAt: args.expiresAt ?? null,
        rpmLimit: args.rpmLimit ?? null,
        tpmLimit: args.tpmLimit ?? null,
      }),
  }),
  revokeApiKey: t.field({
    type: ApiKeyRef,
    description: "Revokes a tenant's key: members their own keys, owners any (data-plane nodes drop it within a second).",
    args: { tenantId: t.arg.id({ required: true }), id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => revokeTenantApiKey(ctx.db, ctx.principal, { tenantId: String(args.tenantId), keyId: String(args.id) }),
  }),
}));
