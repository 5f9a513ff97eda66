import { builder } from '../../graphql/builder.ts';
import { Surface } from '../catalog/catalog.graphql.ts';
import { TenantRef } from '../tenants/tenants.graphql.ts';
import { summariseUsage, type UsageSummary, type UsageTotals } from './usage.service.ts';
import { AGGREGATE_POINTS } from '../auth/principal-rate-limit.ts';

const UsageTotalsRef = builder.objectRef<UsageTotals>('UsageTotals').implement({
  fields: (t) => ({
    requests: t.exposeInt('requests'),
    promptTokens: t.exposeFloat('promptTokens', { description: 'Input tokens (Float: sums can pass 2^31).' }),
    completionTokens: t.exposeFloat('completionTokens', { description: 'Output tokens.' }),
    gpuSeconds: t.exposeFloat('gpuSeconds', { description: 'Dedicated replicas: GPU-seconds (replica lifetime x GPU Count; boot, serving and idle).' }),
    costUsd: t.exposeFloat('costUsd', {
      description:
        'Shared mode: tokens x the entry price per million; dedicated mode: GPU-seconds x the entry price per GPU-hour in force when they ran (tokens counted, not billed).',
    }),
  }),
});

const UsageDay = builder.objectRef<UsageSummary['byDay'][number]>('UsageDay').implement({
  fields: (t) => ({
    day: t.exposeString('day', { description: 'UTC day, YYYY-MM-DD.' }),
    requests: t.exposeInt('requests'),
    promptTokens: t.exposeFloat('promptTokens'),
    completionTokens: t.exposeFloat('completionTokens'),
    gpuSeconds: t.exposeFloat('gpuSeconds'),
    costUsd: t.exposeFloat('costUsd', { description: 'Token cost plus GPU time cost.' }),
  }),
});

const UsageByEndpoint = builder.objectRef<UsageSummary['byEndpoint'][number]>('UsageByEndpoint').implement({
  fields: (t) => ({
    endpointId: t.exposeID('entryId', { nullable: true }),
    name: t.exposeString('name', { description: 'The catalog Name (or the requested model when the entry is gone).' }),
    mode: t.field({ type: Surface, resolve: (r) => r.mode }),
    requests: t.exposeInt('requests'),
    promptTokens: t.exposeFloat('promptTokens'),
    completionTokens: t.exposeFloat('completionTokens'),
    gpuSeconds: t.exposeFloat('gpuSeconds'),
    costUsd: t.exposeFloat('costUsd', { description: 'Token cost plus GPU time cost.' }),
  }),
});

const Usage = builder.objectRef<UsageSummary>('Usage').implement({
  description: "A tenant's usage in [from, to).",
  fields: (t) => ({
    from: t.field({ type: 'DateTime', resolve: (u) => u.from }),
    to: t.field({ type: 'DateTime', resolve: (u) => u.to }),
    totals: t.field({ type: UsageTotalsRef, resolve: (u) => u.totals }),
    byDay: t.field({ type: [UsageDay], complexity: { field: 1, multiplier: 10 }, resolve: (u) => u.byDay }),
    byEndpoint: t.field({ type: [UsageByEndpoint], resolve: (u) => u.byEndpoint }),
  }),
});

builder.objectField(TenantRef, 'usage', (t) =>
  t.field({
    type: Usage,
    description: 'Requests, tokens and cost in [from, to) (default: the last 30 days; at most 366 days), by UTC day and by endpoint.',
    args: { from: t.arg({ type: 'DateTime' }), to: t.arg({ type: 'DateTime' }) },
    // An aggregate over up to a year of usage records (hundreds of ms on a busy tenant), not one row.
    complexity: 250,
    resolve: (tenant, args, ctx) => {
      ctx.charge(AGGREGATE_POINTS); // as tRPC's usage.summary costs
      return summariseUsage(ctx.db, ctx.principal, { tenantId: tenant.id, from: args.from, to: args.to });
    },
  }),
);
