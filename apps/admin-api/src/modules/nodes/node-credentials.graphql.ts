import { builder } from '../../graphql/builder.ts';
import {
  createNodeCredential,
  listNodeCredentials,
  revokeNodeCredential,
  type CreatedNodeCredential,
  type NodeCredential,
} from './node-credentials.service.ts';

const NodeCredentialRef = builder.objectRef<NodeCredential>('NodeCredential').implement({
  description: "A data-plane node's credential for the config feed and usage ingest. The secret is never shown again after creation.",
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    prefix: t.exposeString('prefix', { description: 'The first characters of the secret, to recognise it.' }),
    createdAt: t.field({ type: 'DateTime', resolve: (c) => c.createdAt }),
    lastUsedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.lastUsedAt }),
    revokedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.revokedAt }),
  }),
});

const CreatedNodeCredentialRef = builder.objectRef<CreatedNodeCredential>('CreatedNodeCredential').implement({
  fields: (t) => ({
    credential: t.field({ type: NodeCredentialRef, resolve: (c) => c.credential }),
    secret: t.exposeString('secret', { description: "The whole secret (infn_…): shown this once, stored only as a hash. Set it as the node's NODE_TOKEN." }),
  }),
});

builder.queryFields((t) => ({
  nodeCredentials: t.field({
    type: [NodeCredentialRef],
    description: 'Platform admins: every data-plane node credential, newest first.',
    resolve: (_root, _args, ctx) => listNodeCredentials(ctx.db, ctx.principal),
  }),
}));

builder.mutationFields((t) => ({
  createNodeCredential: t.field({
    type: CreatedNodeCredentialRef,
    description: 'Platform admins: issues a credential for one data-plane node; the secret is returned this once.',
    args: { name: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => createNodeCredential(ctx.db, ctx.principal, { name: args.name }),
  }),
  revokeNodeCredential: t.field({
    type: NodeCredentialRef,
    description: "Platform admins: revokes a node credential; the node's requests are refused and its config stream closed.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => revokeNodeCredential(ctx.db, ctx.principal, { id: String(args.id) }),
  }),
}));
