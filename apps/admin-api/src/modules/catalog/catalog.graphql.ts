import { ServiceError } from '../../errors.ts';
import { builder } from '../../graphql/builder.ts';
import { decodeCursor, encodeCursor, PageInfo } from '../../graphql/schema/page-info.ts';
import { toCatalogView, type CatalogView } from './catalog-view.ts';
import { getEntryByName, listEntries } from './catalog.service.ts';

const Endpoint = builder.objectRef<CatalogView>('Endpoint').implement({
  description: 'A published endpoint (catalog entry); string fields use the catalog string forms.',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Exact model identifier, sent as `model`.' }),
    provider: t.exposeString('provider'),
    parameterSize: t.exposeString('parameterSize', { description: '"<number>B", or empty.' }),
    gpuCount: t.exposeInt('gpuCount', { nullable: true }),
    contextLength: t.exposeInt('contextLength', { nullable: true, description: 'Tokens.' }),
    concurrency: t.exposeString('concurrency', { description: '"<number>x", or empty.' }),
    coldStartTtft: t.exposeString('coldStartTtft', { description: '"<number> sec", or empty.' }),
    tokenPrice: t.exposeString('tokenPrice'),
    recommendedUseCases: t.exposeString('recommendedUseCases', { description: 'Comma-separated labels.' }),
    summary: t.exposeString('summary'),
    detailedIntro: t.exposeString('detailedIntro'),
    tags: t.exposeStringList('tags'),
    offeredShared: t.exposeBoolean('offeredShared'),
    offeredDedicated: t.exposeBoolean('offeredDedicated'),
  }),
});

const EndpointEdge = builder.objectRef<{ cursor: string; node: CatalogView }>('EndpointEdge').implement({
  fields: (t) => ({
    cursor: t.exposeString('cursor'),
    node: t.field({ type: Endpoint, resolve: (edge) => edge.node }),
  }),
});

interface ConnectionShape {
  edges: { cursor: string; node: CatalogView }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  totalCount: number;
}

const EndpointConnection = builder.objectRef<ConnectionShape>('EndpointConnection').implement({
  fields: (t) => ({
    edges: t.field({ type: [EndpointEdge], resolve: (c) => c.edges }),
    pageInfo: t.field({ type: PageInfo, resolve: (c) => c.pageInfo }),
    totalCount: t.exposeInt('totalCount'),
  }),
});

const EndpointFilter = builder.inputType('EndpointFilter', {
  fields: (t) => ({
    provider: t.string(),
    tag: t.string(),
    useCase: t.string(),
    search: t.string(),
  }),
});

builder.queryFields((t) => ({
  endpoints: t.field({
    type: EndpointConnection,
    description: 'Published endpoints, browsable by provider, tag and use case (no login needed).',
    args: {
      filter: t.arg({ type: EndpointFilter }),
      first: t.arg.int(),
      after: t.arg.string(),
    },
    resolve: async (_root, args, ctx) => {
      const f = args.filter;
      const entries = await listEntries(ctx.db, {
        publishedOnly: true,
        provider: f?.provider ?? undefined,
        tag: f?.tag ?? undefined,
        useCase: f?.useCase ?? undefined,
        search: f?.search ?? undefined,
      });
      const first = args.first ?? 50;
      if (first < 0 || first > 500) throw new ServiceError('invalid', 'first must be between 0 and 500', 'first');
      let start = 0;
      if (args.after) {
        const index = decodeCursor(args.after);
        if (index === null) throw new ServiceError('invalid', 'after is not a valid cursor', 'after');
        start = index + 1;
      }
      const edges = entries.slice(start, start + first).map((e, i) => ({ cursor: encodeCursor(start + i), node: toCatalogView(e) }));
      return {
        edges,
        totalCount: entries.length,
        pageInfo: {
          hasNextPage: start + first < entries.length,
          hasPreviousPage: start > 0,
          startCursor: edges[0]?.cursor ?? null,
          endCursor: edges.at(-1)?.cursor ?? null,
        },
      };
    },
  }),
  endpoint: t.field({
    type: Endpoint,
    nullable: true,
    args: { name: t.arg.string({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const entry = await getEntryByName(ctx.db, args.name);
      return entry?.published ? toCatalogView(entry) : null;
    },
  }),
}));
