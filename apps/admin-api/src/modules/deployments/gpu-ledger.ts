// The GPU-time ledger: each metered replica's life as phase intervals (boot, serving, idle) in the
// database, written only by the autoscaler leader. An interval still open carries a heartbeat; after a
// crash it is closed at that heartbeat, so time is never counted twice (and at most one heartbeat lost).
import { sql } from 'kysely';
import type { ReplicaPhase } from '@infer/db';
import { isUuid, type Db } from '../../db.ts';

export interface MeteredReplica {
  readonly replicaId: string;
  readonly deploymentId: string;
  readonly tenantId: string;
  readonly entryId: string;
  readonly gpuCount: number;
}

/** Opens the replica's first interval (boot) now. */
export async function openReplicaInterval(db: Db, r: MeteredReplica, phase: ReplicaPhase = 'boot'): Promise<void> {
  await db
    .insertInto('replicaIntervals')
    .values({ ...r, phase, startedAt: sql<Date>`now()`, lastHeartbeatAt: sql<Date>`now()` })
    .onConflict((oc) => oc.column('replicaId').where('endedAt', 'is', null).doNothing())
    .execute();
}

/** Closes the replica's open interval and opens one in `phase`, at the same instant; no-op when already in it or closed. */
export async function switchReplicaPhase(db: Db, replicaId: string, phase: ReplicaPhase): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const open = await trx
      .updateTable('replicaIntervals')
      .set({ endedAt: sql<Date>`now()`, lastHeartbeatAt: sql<Date>`now()` })
      .where('replicaId', '=', replicaId)
      .where('endedAt', 'is', null)
      .where('phase', '!=', phase)
      .returning(['replicaId', 'deploymentId', 'tenantId', 'entryId', 'gpuCount'])
      .executeTakeFirst();
    if (!open) return;
    await trx
      .insertInto('replicaIntervals')
      .values({ ...open, phase, startedAt: sql<Date>`now()`, lastHeartbeatAt: sql<Date>`now()` })
      .execute();
  });
}

/** The replica stopped (or never started): its open interval ends now. */
export async function closeReplicaInterval(db: Db, replicaId: string): Promise<void> {
  if (!isUuid(replicaId)) return;
  await db
    .updateTable('replicaIntervals')
    .set({ endedAt: sql<Date>`now()`, lastHeartbeatAt: sql<Date>`now()` })
    .where('replicaId', '=', replicaId)
    .where('endedAt', 'is', null)
    .execute();
}

/** Proof of life for the replicas this leader runs (every few seconds). */
export async function heartbeatReplicaIntervals(db: Db, replicaIds: readonly string[]): Promise<void> {
  if (replicaIds.length === 0) return;
  await db
    .updateTable('replicaIntervals')
    .set({ lastHeartbeatAt: sql<Date>`now()` })
    .where('replicaId', 'in', [...replicaIds])
    .where('endedAt', 'is', null)
    .execute();
}

/**
 * Closes open intervals of replicas not in `live` at their last heartbeat (a leader that died, or a
 * replica lost without notice). Returns how many were closed.
 */
export async function closeStaleReplicaIntervals(db: Db, live: readonly string[]): Promise<number> {
  let q = db
    .updateTable('replicaIntervals')
    .set({ endedAt: sql<Date>`greatest(started_at, last_heartbeat_at)` })
    .where('endedAt', 'is', null);
  if (live.length > 0) q = q.where('replicaId', 'not in', [...live]);
  const rows = await q.returning('id').execute();
  return rows.length;
}

export interface GpuSeconds {
  readonly boot: number;
  readonly serving: number;
  readonly idle: number;
  readonly total: number;
}

export interface GpuScope {
  readonly tenantId: string;
  readonly deploymentId?: string;
  readonly from: Date;
  readonly to: Date;
}

export interface GpuPiece {
  readonly deploymentId: string;
  readonly entryId: string;
  readonly phase: ReplicaPhase;
  /** UTC day, YYYY-MM-DD. */
  readonly day: string;
  readonly gpuSeconds: number;
}

const DAY_MS = 86_400_000;

/**
 * GPU-seconds in [from, to), clipped to the range and split by UTC day. An open interval counts up to
 * its last heartbeat (what is proven, never more).
 */
export async function gpuPieces(db: Db, scope: GpuScope): Promise<GpuPiece[]> {
  if (!isUuid(scope.tenantId) || (scope.deploymentId !== undefined && !isUuid(scope.deploymentId))) return [];
  let q = db
    .selectFrom('replicaIntervals')
    .select(['deploymentId', 'entryId', 'phase', 'gpuCount', 'startedAt', sql<Date>`coalesce(ended_at, last_heartbeat_at)`.as('endAt')])
    .where('tenantId', '=', scope.tenantId)
    .where('startedAt', '<', scope.to)
    .where(sql<boolean>`coalesce(ended_at, last_heartbeat_at) > ${scope.from}`);
  if (scope.deploymentId !== undefined) q = q.where('deploymentId', '=', scope.deploymentId);
  const rows = await q.execute();
  const out = new Map<string, { deploymentId: string; entryId: string; phase: ReplicaPhase; day: string; gpuSeconds: number }>();
  for (const r of rows) {
    let start = Math.max(new Date(r.startedAt).getTime(), scope.from.getTime());
    const end = Math.min(new Date(r.endAt).getTime(), scope.to.getTime());
    while (start < end) {
      const dayEnd = Math.min(end, (Math.floor(start / DAY_MS) + 1) * DAY_MS);
      const day = new Date(start).toISOString().slice(0, 10);
      const key = `${r.deploymentId}|${r.phase}|${day}`;
      const piece = out.get(key) ?? { deploymentId: r.deploymentId, entryId: r.entryId, phase: r.phase, day, gpuSeconds: 0 };
      piece.gpuSeconds += ((dayEnd - start) / 1000) * r.gpuCount;
      out.set(key, piece);
      start = dayEnd;
    }
  }
  return [...out.values()];
}

/** True when the ledger holds GPU time of this deployment of this tenant (it outlives a deleted deployment). */
export async function hasGpuTime(db: Db, ref: { readonly tenantId: string; readonly deploymentId: string }): Promise<boolean> {
  if (!isUuid(ref.tenantId) || !isUuid(ref.deploymentId)) return false;
  const row = await db
    .selectFrom('replicaIntervals')
    .select('id')
    .where('tenantId', '=', ref.tenantId)
    .where('deploymentId', '=', ref.deploymentId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** GPU-seconds of a tenant (or one of its deployments) in [from, to), by phase. */
export async function gpuSecondsOf(db: Db, scope: GpuScope): Promise<GpuSeconds> {
  const sums = { boot: 0, serving: 0, idle: 0 };
  for (const p of await gpuPieces(db, scope)) sums[p.phase] += p.gpuSeconds;
  const r = roundGpuSeconds;
  return { boot: r(sums.boot), serving: r(sums.serving), idle: r(sums.idle), total: r(sums.boot + sums.serving + sums.idle) };
}

/** GPU-seconds to the millisecond, as answered (sums of float intervals carry noise: 415.59999999999997). */
export function roundGpuSeconds(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}

export interface GpuCostRow {
  readonly entryId: string;
  readonly day: string;
  readonly gpuSeconds: number;
  readonly costUsd: number;
}

/** A tenant's GPU time in [from, to) by entry and UTC day, priced at each entry's USD per GPU-hour (none: $0). */
export async function gpuCosts(db: Db, scope: GpuScope): Promise<GpuCostRow[]> {
  const pieces = await gpuPieces(db, scope);
  if (pieces.length === 0) return [];
  const entryIds = [...new Set(pieces.map((p) => p.entryId))];
  const prices = new Map(
    (await db.selectFrom('catalogEntries').select(['id', 'dedicatedPricePerGpuHour']).where('id', 'in', entryIds).execute()).map((e) => [
      e.id,
      e.dedicatedPricePerGpuHour ?? 0,
    ]),
  );
  const rows = new Map<string, { entryId: string; day: string; gpuSeconds: number; costUsd: number }>();
  for (const p of pieces) {
    const key = `${p.entryId}|${p.day}`;
    const row = rows.get(key) ?? { entryId: p.entryId, day: p.day, gpuSeconds: 0, costUsd: 0 };
    row.gpuSeconds += p.gpuSeconds;
    row.costUsd += (p.gpuSeconds / 3600) * (prices.get(p.entryId) ?? 0);
    rows.set(key, row);
  }
  return [...rows.values()];
}
