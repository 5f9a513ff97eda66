import { notFound } from '../../errors.ts';
import type { InputFieldBuilder } from '@pothos/core';
import { builder, type BuilderTypes } from '../../graphql/builder.ts';
import { batched, memoise, type GraphQLContext } from '../../graphql/context.ts';
import { connectionComplexity, connectionOf, PageInfo, pageWindow, type Connection } from '../../graphql/schema/page-info.ts';
import { toCatalogListView, toCatalogView, type CatalogListView } from './catalog-view.ts';
import type { CatalogEntryInput } from './catalog-input.ts';
import {
  adminCreateEntry,
  adminGetEntry,
  adminSetPublished,
  adminUpdateEntry,
  browseEntriesPage,
  detailedIntrosOf,
  countFacets,
  getEntryByName,
  type FacetCount,
} from './catalog.service.ts';
import {
  callerDeploymentsByEntry,
  endpointIntegration,
  endpointIntegrations,
  type Integration,
  type IntegrationCaller,
  type IntegrationView,
} from './integration.ts';
import { adminSetRuntimeConfig, viewRuntimeConfig } from './runtime-config.service.ts';

export const Surface = builder.enumType('Surface', {
  description: 'Where an endpoint is served: the shared token-billed base, or a tenant-scoped dedicated URL.',
  values: {
    SHARED: { value: 'shared', description: 'One base URL for all published endpoints, billed per token.' },
    DEDICATED: { value: 'dedicated', description: 'A tenant-scoped URL on dedicated GPU capacity.' },
  } as const,
});

const Snippets = builder.objectRef<Integration['snippets']>('IntegrationSnippets').implement({
  description: 'Ready-to-paste requests with the placeholder key.',
  fields: (t) => ({
    curl: t.exposeString('curl'),
    python: t.exposeString('python', { description: 'Python with the `openai` package.' }),
    node: t.exposeString('node', { description: 'Node.js with the `openai` package.' }),
  }),
});

type IntegrationShape = IntegrationView;

const IntegrationRef = builder.objectRef<IntegrationShape>('Integration').implement({
  description: 'The client values of one endpoint on one surface (spec 1.6): API Base URL, Model Name and API Key.',
  fields: (t) => ({
    mode: t.field({ type: Surface, resolve: (i) => i.mode }),
    apiBaseUrl: t.exposeString('apiBaseUrl', { description: 'Up to and including `v1`; append `/chat/completions`.' }),
    modelName: t.exposeString('modelName', {
      description: 'The `model` value: the catalog Name on the shared surface, "<provider>/<Name>" on a dedicated one (the Name also works there).',
    }),
    apiKey: t.exposeString('apiKey', { description: 'Always the placeholder "<INFERENCE_API_KEY>": keys are shown once, when created.' }),
    tenantSlug: t.exposeString('tenantSlug', {
      nullable: true,
      description: 'The tenant of a dedicated URL; null when shared or the `<tenant>` placeholder is shown.',
    }),
    deploymentState: t.exposeString('deploymentState', { nullable: true, description: "The tenant's deployment state, when it has deployed this endpoint." }),
    snippets: t.field({ type: Snippets, resolve: (i) => i.snippets }),
  }),
});

/** The integration rules' view of this request's caller; their tenants' deployments are read once per request. */
function integrationCaller(ctx: GraphQLContext): IntegrationCaller {
  return {
    deployments: ctx.deployments,
    principal: ctx.principal,
    urls: ctx.publicUrls,
    ownDeployments: () => memoise(ctx, 'viewerDeployments', () => callerDeploymentsByEntry(ctx.deployments, ctx.principal)),
  };
}

/** An Endpoint's source: an entry's view; a listed one (`endpoints`) comes without its detailed intro, read when asked. */
type EndpointShape = CatalogListView & { readonly detailedIntro?: string };

const TokenPrice = builder.objectRef<EndpointShape>('TokenPrice').implement({
  description: 'Shared-mode token price in USD per million tokens.',
  fields: (t) => ({
    inputPerMillionTokens: t.exposeFloat('priceInputPerM', { nullable: true }),
    outputPerMillionTokens: t.exposeFloat('priceOutputPerM', { nullable: true }),
    currency: t.string({ resolve: () => 'USD' }),
    display: t.exposeString('tokenPrice', { description: 'The spec string form, or empty.' }),
  }),
});

export const Endpoint = builder.objectRef<EndpointShape>('Endpoint').implement({
  description: 'A published endpoint (catalog entry, spec 2.1). Spec fields are in their string forms; structured values sit beside them.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name', { description: 'Exact model identifier, sent as `model`.' }),
    provider: t.exposeString('provider', { description: 'Can be empty.' }),
    parameterSize: t.exposeString('parameterSize', { description: '"<number>B", or empty.' }),
    parameterSizeBillions: t.exposeFloat('parameterSizeB', { nullable: true }),
    gpuCount: t.exposeInt('gpuCount', { nullable: true }),
    contextLength: t.exposeInt('contextLength', { nullable: true, description: 'Tokens.' }),
    concurrency: t.exposeString('concurrency', { description: '"<number>x", or empty.' }),
    concurrencyMultiplier: t.exposeFloat('concurrencyMultiplier', { nullable: true }),
    coldStartTtft: t.exposeString('coldStartTtft', { description: '"<number> sec", or empty.' }),
    coldStartSeconds: t.exposeFloat('coldStartSeconds', { nullable: true }),
    tokenPrice: t.exposeString('tokenPrice', { description: '"$<in> / $<out> per 1M tokens (input / output)", or empty.' }),
    price: t.field({ type: TokenPrice, resolve: (e) => e }),
    dedicatedPrice: t.exposeString('dedicatedPrice', { description: 'Dedicated deployments: "$<n> per GPU-hour", or empty.' }),
    dedicatedPricePerGpuHour: t.exposeFloat('dedicatedPricePerGpuHour', { nullable: true, description: 'USD per GPU-hour of a dedicated replica.' }),
    recommendedUseCases: t.exposeString('recommendedUseCases', { description: 'Comma-separated labels.' }),
    useCases: t.exposeStringList('useCases'),
    summary: t.exposeString('summary', { description: 'The summary, or "No summary has been added for this endpoint yet."' }),
    detailedIntro: t.string({
      // A page of endpoints reads the intros it shows in one query, only when the field is selected.
      resolve: (e, _args, ctx) => e.detailedIntro ?? batched(ctx, 'detailedIntro', e.id, (ids) => detailedIntrosOf(ctx.db, ids), ''),
    }),
    tags: t.exposeStringList('tags'),
    offeredShared: t.exposeBoolean('offeredShared'),
    offeredDedicated: t.exposeBoolean('offeredDedicated'),
    runtimeConfig: t.string({
      nullable: true,
      description:
        'Platform admins only (null for anyone else, and when unset): how dedicated replicas run on Kubernetes, as JSON (runtime, image, modelSource, extraArgs, env, secretEnv, port, shmSize, resources, nodeSelector).',
      resolve: async (e, _args, ctx) => {
        const config = await viewRuntimeConfig(ctx.db, ctx.principal, e.id);
        return config ? JSON.stringify(config) : null;
      },
    }),
    surfaces: t.field({
      type: [Surface],
      complexity: { field: 1, multiplier: 1 },
      resolve: (e) => [...(e.offeredShared ? (['shared'] as const) : []), ...(e.offeredDedicated ? (['dedicated'] as const) : [])],
    }),
    published: t.exposeBoolean('published'),
    updatedAt: t.field({ type: 'DateTime', resolve: (e) => e.updatedAt }),
    integration: t.field({
      type: IntegrationRef,
      description:
        'How to call this endpoint. Without arguments: the dedicated URL of a tenant of yours that deployed it, else the shared base. ' +
        'mode/tenantSlug pick one; a tenant URL needs membership.',
      args: { mode: t.arg({ type: Surface }), tenantSlug: t.arg.string() },
      resolve: (e, args, ctx) =>
        endpointIntegration(integrationCaller(ctx), { ...e, provider: e.provider || null }, args.mode ?? null, args.tenantSlug ?? null),
    }),
    integrations: t.field({
      type: [IntegrationRef],
      description: "Every way the caller can call it: the shared base (if offered) and each of the caller's tenants' dedicated URLs.",
      complexity: { field: 2, multiplier: 3 },
      resolve: (e, _args, ctx) => endpointIntegrations(integrationCaller(ctx), { ...e, provider: e.provider || null }),
    }),
  }),
});

const EndpointEdge = builder.objectRef<{ cursor: string; node: EndpointShape }>('EndpointEdge').implement({
  fields: (t) => ({
    cursor: t.exposeString('cursor'),
    node: t.field({ type: Endpoint, resolve: (edge) => edge.node }),
  }),
});

const EndpointConnection = builder.objectRef<Connection<EndpointShape>>('EndpointConnection').implement({
  fields: (t) => ({
    edges: t.field({ type: [EndpointEdge], complexity: { field: 1, multiplier: 1 }, resolve: (c) => c.edges }),
    pageInfo: t.field({ type: PageInfo, resolve: (c) => c.pageInfo }),
    totalCount: t.exposeInt('totalCount'),
  }),
});

const EndpointFilter = builder.inputType('EndpointFilter', {
  fields: (t) => ({
    provider: t.string({ description: 'Exact provider, case-insensitive.' }),
    tag: t.string({ description: 'Exact tag label.' }),
    useCase: t.string({ description: 'Exact recommended use case label.' }),
    search: t.string({ description: 'Case-insensitive substring of name, provider or summary.' }),
    surface: t.field({ type: Surface, description: 'Only endpoints offered on this surface.' }),
  }),
});

const FacetValue = builder.objectRef<FacetCount>('FacetValue').implement({
  fields: (t) => ({ value: t.exposeString('value'), count: t.exposeInt('count', { description: 'Published entries with this label.' }) }),
});

const CatalogFacets = builder.objectRef<Awaited<ReturnType<typeof countFacets>>>('CatalogFacets').implement({
  fields: (t) => ({
    providers: t.field({ type: [FacetValue], resolve: (f) => f.providers }),
    tags: t.field({ type: [FacetValue], resolve: (f) => f.tags }),
    useCases: t.field({ type: [FacetValue], resolve: (f) => f.useCases }),
  }),
});

builder.queryFields((t) => ({
  endpoints: t.field({
    type: EndpointConnection,
    description: 'Published endpoints, by name; browse by provider, tag, use case or search (no login needed).',
    args: { filter: t.arg({ type: EndpointFilter }), first: t.arg.int(), after: t.arg.string() },
    complexity: connectionComplexity,
    resolve: async (_root, args, ctx) => {
      const f = args.filter;
      const { first, start } = pageWindow(args);
      const { entries, total } = await browseEntriesPage(
        ctx.db,
        {
          provider: f?.provider ?? undefined,
          tag: f?.tag ?? undefined,
          useCase: f?.useCase ?? undefined,
          search: f?.search ?? undefined,
          mode: f?.surface ?? undefined,
        },
        { offset: start, limit: first },
      );
      return connectionOf(entries.map(toCatalogListView), start, first, total);
    },
  }),
  endpoint: t.field({
    type: Endpoint,
    nullable: true,
    description: 'One published endpoint by its exact Name (null when there is none).',
    args: { name: t.arg.string({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const entry = await getEntryByName(ctx.db, args.name);
      return entry?.published ? toCatalogView(entry) : null;
    },
  }),
  catalogFacets: t.field({
    type: CatalogFacets,
    description: 'Providers, tags and use cases of published endpoints, with counts.',
    resolve: (_root, _args, ctx) => countFacets(ctx.db),
  }),
  catalogEntry: t.field({
    type: Endpoint,
    nullable: true,
    description: 'Platform admins: any entry (published or not) by id or Name.',
    args: { id: t.arg.id(), name: t.arg.string() },
    resolve: async (_root, args, ctx) => {
      const entry = await adminGetEntry(ctx.db, ctx.principal, { id: args.id == null ? null : String(args.id), name: args.name });
      return entry ? toCatalogView(entry) : null;
    },
  }),
}));

/** The entry fields shared by the create and update inputs (string forms or structured values). */
function entryFields(t: InputFieldBuilder<BuilderTypes, 'InputObject'>) {
  return {
    provider: t.string(),
    parameterSize: t.string({ description: '"<number>B", e.g. "70B".' }),
    parameterSizeBillions: t.float(),
    gpuCount: t.int(),
    contextLength: t.int({ description: 'Tokens.' }),
    concurrency: t.string({ description: '"<number>x", e.g. "2x".' }),
    concurrencyMultiplier: t.float(),
    coldStartTtft: t.string({ description: '"<number> sec", e.g. "5 sec".' }),
    coldStartSeconds: t.float(),
    tokenPrice: t.string({ description: '"$<in> / $<out> per 1M tokens" (USD per million input / output tokens).' }),
    priceInputPerMillion: t.float(),
    priceOutputPerMillion: t.float(),
    dedicatedPrice: t.string({ description: '"$<n> per GPU-hour" (USD per GPU-hour of a dedicated replica).' }),
    dedicatedPricePerGpuHour: t.float(),
    recommendedUseCases: t.string({ description: 'Comma-separated labels.' }),
    useCases: t.stringList(),
    summary: t.string({ description: 'Empty or null: the default summary text is shown.' }),
    detailedIntro: t.string(),
    tags: t.stringList(),
    offeredShared: t.boolean(),
    offeredDedicated: t.boolean(),
  };
}

const CreateCatalogEntryInput = builder.inputType('CreateCatalogEntryInput', {
  description: 'A new (unpublished) entry; fields take the spec string forms or structured values (both must agree).',
  fields: (t) => ({ name: t.string({ required: true }), ...entryFields(t) }),
});

const UpdateCatalogEntryInput = builder.inputType('UpdateCatalogEntryInput', {
  description: 'Fields to change; an absent field is kept, null clears it.',
  fields: (t) => ({ name: t.string(), ...entryFields(t) }),
});

builder.mutationFields((t) => ({
  createCatalogEntry: t.field({
    type: Endpoint,
    description: 'Platform admins: adds an unpublished catalog entry.',
    args: { input: t.arg({ type: CreateCatalogEntryInput, required: true }) },
    resolve: async (_root, { input }, ctx) =>
      toCatalogView(await adminCreateEntry(ctx.db, ctx.principal, { ...(input as CatalogEntryInput), name: input.name })),
  }),
  updateCatalogEntry: t.field({
    type: Endpoint,
    description: 'Platform admins: changes an entry.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateCatalogEntryInput, required: true }) },
    resolve: async (_root, { id, input }, ctx) =>
      toCatalogView(await adminUpdateEntry(ctx.db, ctx.principal, String(id), { ...(input as CatalogEntryInput), name: input.name })),
  }),
  publishCatalogEntry: t.field({
    type: Endpoint,
    description: 'Platform admins: shows the entry in the public catalog.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => toCatalogView(await adminSetPublished(ctx.db, ctx.principal, String(id), true)),
  }),
  setCatalogEntryRuntimeConfig: t.field({
    type: Endpoint,
    description: 'Platform admins: how the entry runs on Kubernetes (JSON object; null or empty clears it). Applies to replicas started afterwards.',
    args: { id: t.arg.id({ required: true }), runtimeConfig: t.arg.string() },
    resolve: async (_root, args, ctx) => {
      await adminSetRuntimeConfig(ctx.db, ctx.principal, String(args.id), args.runtimeConfig ?? null);
      const entry = await adminGetEntry(ctx.db, ctx.principal, { id: String(args.id) });
      if (!entry) throw notFound('catalog entry');
      return toCatalogView(entry);
    },
  }),
  unpublishCatalogEntry: t.field({
    type: Endpoint,
    description: 'Platform admins: hides the entry from the public catalog.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => toCatalogView(await adminSetPublished(ctx.db, ctx.principal, String(id), false)),
  }),
}));
