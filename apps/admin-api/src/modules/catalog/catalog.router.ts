import { MAX_ENTRY_NAME_LENGTH, MAX_URL_LENGTH } from '../../check-name.ts';
import { z } from 'zod';
import { runtimeKinds } from '@infer/shared';
import { notFound } from '../../errors.ts';
import { adminProcedure, publicProcedure, router } from '../../trpc/init.ts';
import { toCatalogListView, toCatalogView } from './catalog-view.ts';
import { observedColdStart } from '../deployments/node-load.ts';
import { adminGetRuntimeConfig, adminSetRuntimeConfig } from './runtime-config.service.ts';
import {
  adminAddUpstream,
  adminCreateEntry,
  adminGetEntry,
  adminListEntries,
  adminListUpstreams,
  adminRemoveUpstream,
  adminSetPublished,
  adminUpdateEntry,
  browseEntries,
  getEntryByName,
  listFacets,
} from './catalog.service.ts';

const filter = z
  .object({
    provider: z.string().max(200).optional(),
    tag: z.string().max(200).optional(),
    useCase: z.string().max(200).optional(),
    search: z.string().max(200).optional(),
  })
  .optional();

const str = (max: number) => z.string().max(max).nullable().optional();
const num = z.number().nullable().optional();

/**
 * Entry fields as admins write them: spec 2.1 string forms ("70B", "2x", "5 sec", "$0.20 / $0.60",
 * "Chat, Coding") or structured values; `parseEntryInput` validates and names the bad field.
 */
const entryFields = z.object({
  provider: str(200),
  parameterSize: str(50),
  parameterSizeBillions: num,
  gpuCount: num,
  contextLength: num,
  concurrency: str(50),
  concurrencyMultiplier: num,
  coldStartTtft: str(50),
  coldStartSeconds: num,
  tokenPrice: str(200),
  priceInputPerMillion: num,
  priceOutputPerMillion: num,
  dedicatedPrice: str(100),
  dedicatedPricePerGpuHour: num,
  recommendedUseCases: str(5000),
  useCases: z.array(z.string()).nullable().optional(),
  summary: str(4000),
  detailedIntro: str(50_000),
  tags: z.array(z.string()).nullable().optional(),
  offeredShared: z.boolean().nullable().optional(),
  offeredDedicated: z.boolean().nullable().optional(),
});

const entryId = z.object({ id: z.uuid() });

export const catalogRouter = router({
  /** Published endpoints without their detailed intros (`byName` has them); browsing needs no login. */
  list: publicProcedure.input(filter).query(async ({ ctx, input }) => {
    const entries = await browseEntries(ctx.db, input ?? {});
    return entries.map(toCatalogListView);
  }),
  byName: publicProcedure.input(z.object({ name: z.string().min(1).max(MAX_ENTRY_NAME_LENGTH) })).query(async ({ ctx, input }) => {
    const entry = await getEntryByName(ctx.db, input.name);
    return entry?.published ? toCatalogView(entry) : null;
  }),
  facets: publicProcedure.query(({ ctx }) => listFacets(ctx.db)),
  /** Measured cold-start TTFT (p50/p95) of an entry's dedicated deployments, as GraphQL's Endpoint.observedColdStart. */
  observedColdStart: publicProcedure.input(entryId).query(({ ctx, input }) => observedColdStart(ctx.db, input.id)),

  admin: router({
    /** Every entry, unpublished included (platform admin). */
    list: adminProcedure.input(filter).query(async ({ ctx, input }) => (await adminListEntries(ctx.db, ctx.principal, input ?? {})).map(toCatalogView)),
    /** One entry with its shared-surface upstreams (their API keys never shown). */
    get: adminProcedure.input(entryId).query(async ({ ctx, input }) => {
      const entry = await adminGetEntry(ctx.db, ctx.principal, { id: input.id });
      if (!entry) throw notFound('catalog entry');
      return {
        entry: toCatalogView(entry),
        upstreams: await adminListUpstreams(ctx.db, ctx.principal, entry.id),
        runtimeConfig: await adminGetRuntimeConfig(ctx.db, ctx.principal, entry.id),
      };
    }),
  }),

  /** Adds an entry, unpublished unless `published: true` (as GraphQL's createEntry). */
  /** How the entry's dedicated replicas run on Kubernetes (validated by the service; null clears it). */
  setRuntimeConfig: adminProcedure
    .input(entryId.extend({ runtimeConfig: z.record(z.string(), z.unknown()).nullable() }))
    .mutation(({ ctx, input }) => adminSetRuntimeConfig(ctx.db, ctx.principal, input.id, input.runtimeConfig)),
  create: adminProcedure
    .input(entryFields.extend({ name: z.string().min(1).max(MAX_ENTRY_NAME_LENGTH), published: z.boolean().optional() }))
    .mutation(async ({ ctx, input }) => toCatalogView(await adminCreateEntry(ctx.db, ctx.principal, input))),

  /** Changes fields; omitted fields stay, `null` clears. */
  update: adminProcedure
    .input(entryFields.extend({ id: z.uuid(), name: z.string().min(1).max(MAX_ENTRY_NAME_LENGTH).optional() }))
    .mutation(async ({ ctx, input }) => {
      const { id, ...fields } = input;
      return toCatalogView(await adminUpdateEntry(ctx.db, ctx.principal, id, fields));
    }),

  publish: adminProcedure.input(entryId).mutation(async ({ ctx, input }) => toCatalogView(await adminSetPublished(ctx.db, ctx.principal, input.id, true))),

  unpublish: adminProcedure.input(entryId).mutation(async ({ ctx, input }) => toCatalogView(await adminSetPublished(ctx.db, ctx.principal, input.id, false))),

  upstreams: router({
    list: adminProcedure.input(z.object({ entryId: z.uuid() })).query(({ ctx, input }) => adminListUpstreams(ctx.db, ctx.principal, input.entryId)),
    /** Adds a shared-surface replica (an OpenAI-compatible runtime URL). */
    add: adminProcedure
      .input(
        z.object({
          entryId: z.uuid(),
          url: z.string().min(1).max(MAX_URL_LENGTH),
          kind: z.enum(runtimeKinds),
          servedModel: z.string().min(1).max(300),
          apiKey: z.string().max(2000).nullable().optional(),
          weight: z.number().int().min(1).max(1000).optional(),
        }),
      )
      .mutation(({ ctx, input }) => adminAddUpstream(ctx.db, ctx.principal, input)),
    remove: adminProcedure.input(z.object({ upstreamId: z.uuid() })).mutation(async ({ ctx, input }) => {
      await adminRemoveUpstream(ctx.db, ctx.principal, input.upstreamId);
      return { ok: true as const };
    }),
  }),
});
