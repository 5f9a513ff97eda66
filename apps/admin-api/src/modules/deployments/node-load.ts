// Load reports and cold-start samples from data-plane nodes. Reports are kept in the database (one row
// per node and deployment, replaced each second) so whichever control-plane replica receives them, the
// autoscaler leader reads them; a node's report expires after a few seconds.
import { sql } from 'kysely';
import type { ColdStartSample, DeploymentLoad } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';

export interface LoadReportInput {
  /** The reporting node, qualified by its credential so one node cannot overwrite another's report. */
  readonly nodeKey: string;
  readonly deployments: readonly DeploymentLoad[];
  readonly coldStarts: readonly ColdStartSample[];
}

/** Replaces the node's load rows (deployments it no longer lists drop to nothing) and records cold starts. */
export async function ingestLoadReport(db: Db, report: LoadReportInput): Promise<void> {
  const loads = new Map<string, DeploymentLoad>();
  for (const d of report.deployments) if (isUuid(d.deploymentId)) loads.set(d.deploymentId, d);
  await db.transaction().execute(async (trx) => {
    let del = trx.deleteFrom('nodeLoads').where('nodeId', '=', report.nodeKey);
    if (loads.size > 0) del = del.where('deploymentId', 'not in', [...loads.keys()]);
    await del.execute();
    if (loads.size > 0) {
      await trx
        .insertInto('nodeLoads')
        .values(
          [...loads.values()].map((d) => ({
            nodeId: report.nodeKey,
            deploymentId: d.deploymentId,
            inFlight: d.inFlight,
            held: d.held,
            reportedAt: sql<Date>`now()`,
          })),
        )
        .onConflict((oc) =>
          oc.columns(['nodeId', 'deploymentId']).doUpdateSet((eb) => ({
            inFlight: eb.ref('excluded.inFlight'),
            held: eb.ref('excluded.held'),
            reportedAt: eb.ref('excluded.reportedAt'),
          })),
        )
        .execute();
    }
    const samples = report.coldStarts.filter((c) => isUuid(c.deploymentId));
    if (samples.length > 0) {
      // The entry comes from the deployment row, not from the node's word.
      const rows = await trx
        .selectFrom('deployments')
        .select(['id', 'entryId'])
        .where('id', 'in', [...new Set(samples.map((c) => c.deploymentId))])
        .execute();
      const entryOf = new Map(rows.map((r) => [r.id, r.entryId]));
      const values = samples.flatMap((c) => {
        const entryId = entryOf.get(c.deploymentId);
        return entryId ? [{ deploymentId: c.deploymentId, entryId, nodeId: report.nodeKey, waitMs: c.waitMs, ttftMs: c.ttftMs }] : [];
      });
      if (values.length > 0) await trx.insertInto('coldStarts').values(values).execute();
    }
  });
}

export interface AggregateLoad {
  readonly inFlight: number;
  readonly held: number;
  readonly nodes: number;
}

/** In-flight and held requests per deployment, summed over nodes whose report is younger than `ttlMs`. */
export async function readAggregateLoad(db: Db, ttlMs: number): Promise<Map<string, AggregateLoad>> {
  const rows = await db
    .selectFrom('nodeLoads')
    .select(['deploymentId', sql<number>`sum(in_flight)`.as('inFlight'), sql<number>`sum(held)`.as('held'), sql<number>`count(*)`.as('nodes')])
    .where(sql<boolean>`reported_at > now() - make_interval(secs => ${ttlMs / 1000})`)
    .groupBy('deploymentId')
    .execute();
  return new Map(rows.map((r) => [r.deploymentId, { inFlight: Number(r.inFlight), held: Number(r.held), nodes: Number(r.nodes) }]));
}

/** Drops reports long expired (nodes that went away). */
export async function pruneLoadReports(db: Db, olderThanMs: number): Promise<void> {
  await db
    .deleteFrom('nodeLoads')
    .where(sql<boolean>`reported_at < now() - make_interval(secs => ${olderThanMs / 1000})`)
    .execute();
}

export interface ObservedColdStart {
  readonly samples: number;
  readonly p50Seconds: number | null;
  readonly p95Seconds: number | null;
}

/** Samples behind a measured cold start the data plane plans holds with (fewer: the stated Cold Start TTFT). */
export const MEASURED_COLD_START_MIN_SAMPLES = 3;
/** Recent samples per entry that the measured cold start is taken from. */
export const MEASURED_COLD_START_WINDOW = 100;

/**
 * The measured cold start of each entry, seconds: the p95 of its last `MEASURED_COLD_START_WINDOW` observed
 * cold-start TTFTs, with at least `MEASURED_COLD_START_MIN_SAMPLES` of them. A request that arrived mid-boot
 * waited less than a whole boot, so the p95 (not the p50) stands for a full one.
 */
export async function measuredColdStarts(db: Db, entryIds: readonly string[]): Promise<Map<string, number>> {
  const ids = [...new Set(entryIds)].filter(isUuid);
  const out = new Map<string, number>();
  if (ids.length === 0) return out;
  // Per entry, only its newest samples are read (index cold_starts_entry_idx), however long its history.
  const { rows } = await sql<{ entryId: string; ttftMs: number }>`
    select e.id as entry_id, c.ttft_ms
    from (values ${sql.join(ids.map((id) => sql`(${id}::uuid)`))}) as e(id)
    cross join lateral (
      select ttft_ms from cold_starts where entry_id = e.id order by recorded_at desc limit ${MEASURED_COLD_START_WINDOW}
    ) c`.execute(db);
  const byEntry = new Map<string, number[]>();
  for (const r of rows) {
    const xs = byEntry.get(r.entryId);
    if (xs === undefined) byEntry.set(r.entryId, [r.ttftMs]);
    else xs.push(r.ttftMs);
  }
  for (const [id, xs] of byEntry) {
    if (xs.length < MEASURED_COLD_START_MIN_SAMPLES) continue;
    xs.sort((a, b) => a - b);
    out.set(id, Math.round(xs[Math.ceil(0.95 * xs.length) - 1]!) / 1000);
  }
  return out;
}

/** An entry with no cold start measured. */
export const NO_SAMPLES: ObservedColdStart = Object.freeze({ samples: 0, p50Seconds: null, p95Seconds: null });

/**
 * Observed time to first token of requests that waited for a cold start, per catalog entry (its last `limit` samples),
 * for many entries in one query: the p50 and p95 are taken in the database (`percentile_disc`: the first sample at or
 * past that share, as a sorted list's ceil(q x n)-th), so a page of 500 entries is one round trip, not 500.
 */
export async function observedColdStarts(db: Db, entryIds: readonly string[], limit = 1000): Promise<Map<string, ObservedColdStart>> {
  const ids = [...new Set(entryIds)].filter(isUuid);
  const out = new Map<string, ObservedColdStart>();
  if (ids.length === 0) return out;
  const { rows } = await sql<{ entryId: string; samples: number; p50: number | null; p95: number | null }>`
    select e.id as entry_id, c.samples, c.p50, c.p95
    from (values ${sql.join(ids.map((id) => sql`(${id}::uuid)`))}) as e(id)
    cross join lateral (
      select count(*)::int as samples,
        percentile_disc(0.5) within group (order by ttft_ms) as p50,
        percentile_disc(0.95) within group (order by ttft_ms) as p95
      from (select ttft_ms from cold_starts where entry_id = e.id order by recorded_at desc limit ${limit}) s
    ) c`.execute(db);
  for (const r of rows) {
    out.set(r.entryId, {
      samples: Number(r.samples),
      p50Seconds: r.p50 === null ? null : Number(r.p50) / 1000,
      p95Seconds: r.p95 === null ? null : Number(r.p95) / 1000,
    });
  }
  return out;
}

/** Observed time to first token of requests that waited for a cold start, for one catalog entry (last `limit` samples). */
export async function observedColdStart(db: Db, entryId: string, limit = 1000): Promise<ObservedColdStart> {
  return (await observedColdStarts(db, [entryId], limit)).get(entryId) ?? NO_SAMPLES;
}
