import { sql } from 'kysely';
import type { UsageRecord } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { ServiceError } from '../../errors.ts';
import { checkApiInstant } from '../../instant.ts';
import { gpuCosts, roundGpuSeconds } from '../deployments/gpu-ledger.ts';
import { requireTenantRole } from '../access/access.ts';
import type { Principal } from '../access/principal.ts';

export interface IngestResult {
  /** Records stored by this call. */
  accepted: number;
  /** Records already stored (same request id): a retried batch never bills twice. */
  duplicates: number;
  /**
   * Records dropped: not storable (unreadable time, out-of-range numbers, NUL in text), token counts
   * beyond MAX_TOKENS_PER_RECORD, an unknown key, or a tenant or deployment that is not the key's.
   */
  rejected: number;
  /** The request ids of the rejected records, so that the node keeps them for an operator (`rejected.ndjson`). */
  rejectedRequestIds: string[];
}

/** More tokens than any context window holds: a record claiming it is forged or corrupt. */
export const MAX_TOKENS_PER_RECORD = 10_000_000;

const INT4_MAX = 2_147_483_647;
const INT4_MIN = -2_147_483_648;
// Postgres timestamptz holds 4713 BC .. 294276 AD; a usage record is never outside 1970 .. 9999.
const MIN_STARTED_AT = Date.UTC(1970, 0, 1);
const MAX_STARTED_AT = Date.UTC(10000, 0, 1);

const tokenCount = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= MAX_TOKENS_PER_RECORD;

/** True when every column of the record fits its Postgres type and its token counts are plausible. */
function storable(r: UsageRecord): boolean {
  if (!isUuid(r.keyId)) return false;
  const started = Date.parse(r.startedAt);
  if (!Number.isFinite(started) || started < MIN_STARTED_AT || started >= MAX_STARTED_AT) return false;
  const int4 = (n: number): boolean => Number.isInteger(n) && n >= INT4_MIN && n <= INT4_MAX;
  if (!tokenCount(r.promptTokens) || !tokenCount(r.completionTokens) || !int4(r.status)) return false;
  if (!Number.isFinite(r.latencyMs) || (r.ttftMs !== null && !Number.isFinite(r.ttftMs))) return false;
  return !r.requestId.includes('\u0000') && !r.model.includes('\u0000');
}

/**
 * Keeps the records whose key exists and whose tenant (and deployment, when set) is the key's: the
 * tenant billed is always derived from the key here, never taken from the node. A deployment deleted since
 * the request ran is known by its delete's audit row (tenant included), so a stream cut by the delete, or a
 * record still spooled when it happened, is billed like any other.
 */
async function ownedByKey(db: Db, records: readonly UsageRecord[]): Promise<UsageRecord[]> {
  if (records.length === 0) return [];
  const keyIds = [...new Set(records.map((r) => r.keyId))];
  const keys = await db.selectFrom('apiKeys').select(['id', 'tenantId']).where('id', 'in', keyIds).execute();
  const keyTenant = new Map(keys.map((k) => [k.id, k.tenantId]));
  const deploymentIds = [...new Set(records.flatMap((r) => (r.deploymentId !== null && isUuid(r.deploymentId) ? [r.deploymentId] : [])))];
  const deployments =
    deploymentIds.length === 0 ? [] : await db.selectFrom('deployments').select(['id', 'tenantId']).where('id', 'in', deploymentIds).execute();
  const deploymentTenant = new Map(deployments.map((d) => [d.id, d.tenantId]));
  const gone = deploymentIds.filter((id) => !deploymentTenant.has(id));
  if (gone.length > 0) {
    const deleted = await db
      .selectFrom('auditLog')
      .select(['targetId', 'tenantId'])
      .where('action', '=', 'deployment.delete')
      .where('targetType', '=', 'deployment')
      .where('targetId', 'in', gone)
      .execute();
    for (const d of deleted) if (d.targetId !== null && d.tenantId !== null) deploymentTenant.set(d.targetId, d.tenantId);
  }
  return records.filter((r) => {
    const tenant = keyTenant.get(r.keyId);
    if (tenant === undefined || tenant !== r.tenantId) return false;
    return r.deploymentId === null || deploymentTenant.get(r.deploymentId) === tenant;
  });
}

/**
 * Stores a batch idempotently on request id, pricing shared-mode records from the entry's per-million
 * token prices (dedicated mode bills GPU time, not tokens). One INSERT for the whole batch.
 */
export async function ingestUsage(db: Db, records: readonly UsageRecord[]): Promise<IngestResult> {
  const orNull = (id: string | null): string | null => (id !== null && isUuid(id) ? id : null);
  const owned = await ownedByKey(db, records.filter(storable));
  const rows = owned.map((r) => ({
    request_id: r.requestId,
    tenant_id: r.tenantId,
    key_id: r.keyId,
    entry_id: orNull(r.endpointId),
    deployment_id: orNull(r.deploymentId),
    mode: r.mode,
    model: r.model,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    estimated: r.estimated,
    status: r.status,
    ttft_ms: r.ttftMs,
    latency_ms: r.latencyMs,
    started_at: new Date(r.startedAt).toISOString(),
  }));
  const rejected = records.length - rows.length;
  const kept = new Set(owned);
  const rejectedRequestIds = rejected === 0 ? [] : records.filter((r) => !kept.has(r)).map((r) => r.requestId);
  if (rows.length === 0) return { accepted: 0, duplicates: 0, rejected, rejectedRequestIds };

  const inserted = await sql<{ requestId: string }>`
    insert into usage_records (
      request_id, tenant_id, key_id, entry_id, deployment_id, mode, model, prompt_tokens, completion_tokens,
      estimated, status, ttft_ms, latency_ms, cost_usd, started_at
    )
    select r.request_id, r.tenant_id, r.key_id, r.entry_id, r.deployment_id, r.mode, r.model, r.prompt_tokens,
      r.completion_tokens, r.estimated, r.status, r.ttft_ms, r.latency_ms,
      case when r.mode = 'shared'
        then (r.prompt_tokens * coalesce(e.price_input_per_m, 0) + r.completion_tokens * coalesce(e.price_output_per_m, 0)) / 1000000.0
        else 0 end,
      r.started_at
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r(
      request_id text, tenant_id uuid, key_id uuid, entry_id uuid, deployment_id uuid, mode text, model text,
      prompt_tokens integer, completion_tokens integer, estimated boolean, status integer, ttft_ms double precision,
      latency_ms double precision, started_at timestamptz
    )
    left join catalog_entries e on e.id = r.entry_id
    on conflict (request_id) do nothing
    returning request_id
  `.execute(db);
  const accepted = inserted.rows.length;

  const keyIds = [...new Set(rows.flatMap((r) => (r.key_id ? [r.key_id] : [])))];
  if (keyIds.length > 0) {
    await db
      .updateTable('apiKeys')
      .set({ lastUsedAt: sql<Date>`now()` })
      .where('id', 'in', keyIds)
      .execute();
  }
  return { accepted, duplicates: rows.length - accepted, rejected, rejectedRequestIds };
}

export interface UsageTotals {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  /** Dedicated replicas' GPU-seconds (the GPU-time ledger). */
  gpuSeconds: number;
  /** Shared tokens x token price, plus GPU-seconds x the dedicated price per GPU-hour in force when they ran. */
  costUsd: number;
}

export interface UsageSummary {
  from: string;
  to: string;
  totals: UsageTotals;
  /** UTC days (YYYY-MM-DD), oldest first. */
  byDay: (UsageTotals & { day: string })[];
  byEndpoint: (UsageTotals & { entryId: string | null; name: string; mode: 'shared' | 'dedicated' })[];
}

const totals = sql<number>`count(*)`;

/**
 * A tenant's usage in [from, to), by UTC day and by endpoint and mode, for the tenant's members (platform
 * admins and the tenant's admin tokens too); another tenant reads as not found. Absent bounds default and
 * the span is checked here (`usageRange`), so every surface applies the same rules.
 */
export async function summariseUsage(
  db: Db,
  principal: Principal,
  input: { readonly tenantId: string; readonly from?: Date | null; readonly to?: Date | null },
  now: Date = new Date(),
): Promise<UsageSummary> {
  requireTenantRole(principal, input.tenantId, 'member');
  return tenantUsage(db, { tenantId: input.tenantId, ...usageRange(input, now) });
}

async function tenantUsage(db: Db, input: { tenantId: string; from: Date; to: Date }): Promise<UsageSummary> {
  const empty: UsageTotals = { requests: 0, promptTokens: 0, completionTokens: 0, gpuSeconds: 0, costUsd: 0 };
  const range = { from: input.from.toISOString(), to: input.to.toISOString() };
  if (!isUuid(input.tenantId)) return { ...range, totals: empty, byDay: [], byEndpoint: [] };
  const base = db
    .selectFrom('usageRecords as u')
    .where('u.tenantId', '=', input.tenantId)
    .where('u.startedAt', '>=', input.from)
    .where('u.startedAt', '<', input.to);
  const sums = [
    totals.as('requests'),
    sql<number>`coalesce(sum(u.prompt_tokens), 0)`.as('promptTokens'),
    sql<number>`coalesce(sum(u.completion_tokens), 0)`.as('completionTokens'),
    sql<number>`coalesce(sum(u.cost_usd), 0)`.as('costUsd'),
  ] as const;
  const day = sql<string>`to_char(date_trunc('day', u.started_at at time zone 'UTC'), 'YYYY-MM-DD')`;
  const byDay = await base
    .select([day.as('day'), ...sums])
    .groupBy(day)
    .orderBy(day)
    .execute();
  const byEndpoint = await base
    .leftJoin('catalogEntries as e', 'e.id', 'u.entryId')
    .select(['u.entryId', sql<string>`coalesce(e.name, min(u.model))`.as('name'), 'u.mode', ...sums])
    .groupBy(['u.entryId', 'e.name', 'u.mode'])
    .orderBy(sql`sum(u.cost_usd)`, 'desc')
    .execute();
  const num = (t: Omit<UsageTotals, 'gpuSeconds'>): UsageTotals => ({
    requests: Number(t.requests),
    promptTokens: Number(t.promptTokens),
    completionTokens: Number(t.completionTokens),
    gpuSeconds: 0,
    costUsd: Number(t.costUsd),
  });
  const rowsByDay: UsageSummary['byDay'] = byDay.map((r) => ({ day: r.day, ...num(r) }));
  const rowsByEndpoint: UsageSummary['byEndpoint'] = byEndpoint.map((r) => ({ entryId: r.entryId, name: r.name, mode: r.mode, ...num(r) }));
  // Dedicated GPU time joins the same rows (days and endpoints with GPU time but no request get rows too).
  const gpu = await gpuCosts(db, { tenantId: input.tenantId, from: input.from, to: input.to });
  const names =
    gpu.length === 0
      ? new Map<string, string>()
      : new Map(
          (
            await db
              .selectFrom('catalogEntries')
              .select(['id', 'name'])
              .where('id', 'in', [...new Set(gpu.map((g) => g.entryId))])
              .execute()
          ).map((e) => [e.id, e.name]),
        );
  for (const g of gpu) {
    let day = rowsByDay.find((r) => r.day === g.day);
    if (!day) rowsByDay.push((day = { day: g.day, ...empty }));
    day.gpuSeconds += g.gpuSeconds;
    day.costUsd += g.costUsd;
    let ep = rowsByEndpoint.find((r) => r.entryId === g.entryId && r.mode === 'dedicated');
    if (!ep) rowsByEndpoint.push((ep = { entryId: g.entryId, name: names.get(g.entryId) ?? g.entryId, mode: 'dedicated', ...empty }));
    ep.gpuSeconds += g.gpuSeconds;
    ep.costUsd += g.costUsd;
  }
  rowsByDay.sort((a, b) => a.day.localeCompare(b.day));
  rowsByEndpoint.sort((a, b) => b.costUsd - a.costUsd);
  const sum = rowsByDay.reduce<UsageTotals>(
    (acc, r) => ({
      requests: acc.requests + r.requests,
      promptTokens: acc.promptTokens + r.promptTokens,
      completionTokens: acc.completionTokens + r.completionTokens,
      gpuSeconds: acc.gpuSeconds + r.gpuSeconds,
      costUsd: acc.costUsd + r.costUsd,
    }),
    empty,
  );
  // Money and GPU time are rounded once, here, as they are answered: sums stay exact until then.
  const answered = <T extends UsageTotals>(t: T): T => ({ ...t, costUsd: roundUsd(t.costUsd), gpuSeconds: roundGpuSeconds(t.gpuSeconds) });
  return { ...range, totals: answered(sum), byDay: rowsByDay.map(answered), byEndpoint: rowsByEndpoint.map(answered) };
}

/** Decimal places of USD amounts in usage answers (a token at $0.05 per million costs $0.00000005). */
export const USD_DECIMALS = 8;

/** A USD amount to `USD_DECIMALS` places: sums of float prices carry noise (0.00023274999999999986). */
export function roundUsd(usd: number): number {
  const scale = 10 ** USD_DECIMALS;
  return Math.round(usd * scale) / scale;
}

const DAY_MS = 86_400_000;
export const MAX_USAGE_RANGE_DAYS = 366;

/** The [from, to) of a usage query: by default the 30 days up to now; from before to; at most 366 days. */
export function usageRange(input: { from?: Date | null; to?: Date | null }, now: Date = new Date()): { from: Date; to: Date } {
  if (input.from) checkApiInstant(input.from, 'from');
  if (input.to) checkApiInstant(input.to, 'to');
  const to = input.to ?? now;
  const from = input.from ?? new Date(to.getTime() - 30 * DAY_MS);
  if (from.getTime() >= to.getTime()) throw new ServiceError('invalid', 'from must be before to', 'from');
  if (to.getTime() - from.getTime() > MAX_USAGE_RANGE_DAYS * DAY_MS) {
    throw new ServiceError('invalid', `the range is at most ${MAX_USAGE_RANGE_DAYS} days`, 'from');
  }
  return { from, to };
}
