// The GPU-time ledger: each metered replica's life as phase intervals (boot, serving, idle) in the
// database, written by the autoscaler leader (and split by a price change). An interval still open carries
// a heartbeat; after a crash it is closed at that heartbeat, so time is never counted twice (and at most
// one heartbeat lost). Each interval keeps the entry's price per GPU-hour from when it opened: past time
// is never repriced.
import { sql, type RawBuilder } from 'kysely';
import type { ReplicaPhase } from '@infer/db';
import { isUuid, type Db } from '../../db.ts';
import { withTransaction } from '../snapshots/outbox.ts';

export interface MeteredReplica {
  readonly replicaId: string;
  readonly deploymentId: string;
  readonly tenantId: string;
  readonly entryId: string;
  readonly gpuCount: number;
}

/**
 * The entry's dedicated price now (none, or no entry: $0). The share lock orders an interval opening at it
 * with a price change (`repriceOpenIntervals`): whichever commits second sees the other's rows.
 */
const priceNow = (entryId: string | RawBuilder<string>): RawBuilder<number> =>
  sql<number>`coalesce((select dedicated_price_per_gpu_hour from catalog_entries where id = ${entryId} for share), 0)`;

/** Opens the replica's first interval (boot) now, at its entry's price now. */
export async function openReplicaInterval(db: Db, r: MeteredReplica, phase: ReplicaPhase = 'boot'): Promise<void> {
  await db
    .insertInto('replicaIntervals')
    .values({ ...r, phase, usdPerGpuHour: priceNow(r.entryId), startedAt: sql<Date>`now()`, lastHeartbeatAt: sql<Date>`now()` })
    .onConflict((oc) => oc.column('replicaId').where('endedAt', 'is', null).doNothing())
    .execute();
}

/** Closes the replica's open interval and opens one in `phase`, at the same instant; no-op when already in it or closed. */
export async function switchReplicaPhase(db: Db, replicaId: string, phase: ReplicaPhase): Promise<void> {
  await db.transaction().execute(async (trx) => {
    // The price first (and its lock, before the interval's: the order a price change takes them in).
    const price = await trx
      .selectNoFrom(priceNow(sql<string>`(select entry_id from replica_intervals where replica_id = ${replicaId} and ended_at is null)`).as('usdPerGpuHour'))
      .executeTakeFirstOrThrow();
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
      .values({ ...open, phase, usdPerGpuHour: price.usdPerGpuHour, startedAt: sql<Date>`now()`, lastHeartbeatAt: sql<Date>`now()` })
      .execute();
  });
}

/**
 * The entry's price changed (call in the transaction that changed it): each of its open intervals at
 * another price closes now and reopens in the same phase at the new price, at the same instant, so time
 * before the change keeps the price it ran at and time after it gets the new one. Returns how many split.
 */
export async function repriceOpenIntervals(db: Db, entryId: string): Promise<number> {
  // One statement, so each reopened interval starts at its predecessor's end to the microsecond. now() is
  // the transaction's start: an interval opened since (committed before the entry was locked) splits at its
  // own start instead, which keeps the ledger's order check.
  const reopened = await db
    .with('closed', (qb) =>
      qb
        .updateTable('replicaIntervals')
        // At the last heartbeat, not now: an open interval counts only what is proven (a replica whose leader died
        // is not billed up to the price change); a live one heartbeats on in its reopened interval.
        .set({ endedAt: sql<Date>`greatest(started_at, least(now(), last_heartbeat_at))` })
        .where('entryId', '=', entryId)
        .where('endedAt', 'is', null)
        .where(sql<boolean>`usd_per_gpu_hour is distinct from ${priceNow(entryId)}`)
        .returning(['replicaId', 'deploymentId', 'tenantId', 'entryId', 'gpuCount', 'phase', 'endedAt']),
    )
    .insertInto('replicaIntervals')
    .columns(['replicaId', 'deploymentId', 'tenantId', 'entryId', 'gpuCount', 'phase', 'usdPerGpuHour', 'startedAt', 'lastHeartbeatAt'])
    .expression((eb) =>
      eb
        .selectFrom('closed')
        .select([
          'replicaId',
          'deploymentId',
          'tenantId',
          'entryId',
          'gpuCount',
          'phase',
          priceNow(entryId).as('usdPerGpuHour'),
          sql<Date>`ended_at`.as('startedAt'),
          sql<Date>`ended_at`.as('lastHeartbeatAt'),
        ]),
    )
    .returning('id')
    .execute();
  return reopened.length;
}

/** The replica stopped (or never started): its open interval ends now. */
export async function closeReplicaInterval(db: Db, replicaId: string): Promise<void> {
  if (!isUuid(replicaId)) return;
  // A price change may split the open interval while this runs: the statement then skips the old row (ended under it)
  // and cannot see the new one, so it runs again until none is left open.
  for (let attempt = 0; attempt < 5; attempt++) {
    const closed = await db
      .updateTable('replicaIntervals')
      .set({ endedAt: sql<Date>`now()`, lastHeartbeatAt: sql<Date>`now()` })
      .where('replicaId', '=', replicaId)
      .where('endedAt', 'is', null)
      .executeTakeFirst();
    if (closed.numUpdatedRows > 0n) return;
    const open = await db.selectFrom('replicaIntervals').select('id').where('replicaId', '=', replicaId).where('endedAt', 'is', null).executeTakeFirst();
    if (open === undefined) return;
  }
}

/**
 * A leader that took the lock back runs these replicas still; one whose interval another leader closed meanwhile (at
 * its last heartbeat) gets a new one from now, in its last phase, at its entry's price now: the time it ran unproven
 * is not billed, the time from now is. Returns how many were reopened.
 */
export async function reopenReplicaIntervals(db: Db, replicaIds: readonly string[]): Promise<number> {
  const ids = replicaIds.filter(isUuid);
  if (ids.length === 0) return 0;
  const { rows } = await sql<{ id: string }>`
    insert into replica_intervals (replica_id, deployment_id, tenant_id, entry_id, gpu_count, phase, usd_per_gpu_hour, started_at, last_heartbeat_at)
    select last.replica_id, last.deployment_id, last.tenant_id, last.entry_id, last.gpu_count, last.phase, ${priceNow(sql<string>`last.entry_id`)}, now(), now()
    from (
      select distinct on (replica_id) replica_id, deployment_id, tenant_id, entry_id, gpu_count, phase
      from replica_intervals where replica_id in (${sql.join(ids)})
      order by replica_id, started_at desc, id desc
    ) last
    where not exists (select 1 from replica_intervals o where o.replica_id = last.replica_id and o.ended_at is null)
    on conflict do nothing
    returning id`.execute(db);
  return rows.length;
}

/**
 * A replica an earlier leader started and this one adopts: its interval still open ends at its last heartbeat (the
 * time since is unproven) and a new one opens now, in `phase`, at its entry's price now, for the GPUs its last interval
 * counted (what the replica was started with; `r` is used only for a replica that has none). One transaction: the
 * replica never has two open intervals, nor none.
 */
export async function adoptReplicaInterval(db: Db, r: MeteredReplica, phase: ReplicaPhase = 'idle'): Promise<void> {
  await withTransaction(db, async (trx) => {
    const last = await trx
      .selectFrom('replicaIntervals')
      .select(['deploymentId', 'tenantId', 'entryId', 'gpuCount'])
      .where('replicaId', '=', r.replicaId)
      .orderBy('startedAt', 'desc')
      .orderBy('id', 'desc')
      .executeTakeFirst();
    await trx
      .updateTable('replicaIntervals')
      .set({ endedAt: sql<Date>`greatest(started_at, least(now(), last_heartbeat_at))` })
      .where('replicaId', '=', r.replicaId)
      .where('endedAt', 'is', null)
      .execute();
    await openReplicaInterval(trx, { ...r, ...last, replicaId: r.replicaId }, phase);
  });
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
export async function closeStaleReplicaIntervals(db: Db, live: readonly string[], openedBefore?: Date): Promise<number> {
  let q = db
    .updateTable('replicaIntervals')
    .set({ endedAt: sql<Date>`greatest(started_at, last_heartbeat_at)` })
    .where('endedAt', 'is', null);
  // Intervals this leader opened since it took over (an adoption or a start while it recovered) are its own.
  if (openedBefore !== undefined) q = q.where('startedAt', '<', openedBefore);
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
  /** Only these deployments (with `deploymentId`, both apply). */
  readonly deploymentIds?: readonly string[];
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
  /** The GPU-seconds at the price each interval ran at. */
  readonly costUsd: number;
}

const DAY_MS = 86_400_000;

/**
 * GPU-seconds in [from, to), clipped to the range and split by UTC day, with their cost at each interval's
 * own price. An open interval counts up to its last heartbeat (what is proven, never more).
 */
export async function gpuPieces(db: Db, scope: GpuScope): Promise<GpuPiece[]> {
  if (!isUuid(scope.tenantId) || (scope.deploymentId !== undefined && !isUuid(scope.deploymentId))) return [];
  const ids = scope.deploymentIds?.filter(isUuid);
  if (ids !== undefined && ids.length === 0) return [];
  let q = db
    .selectFrom('replicaIntervals')
    .select([
      'deploymentId',
      'entryId',
      'phase',
      'gpuCount',
      // Null: written by a control plane from before the column (a rolling deploy), priced as it was then.
      sql<number>`coalesce(usd_per_gpu_hour, (select dedicated_price_per_gpu_hour from catalog_entries e where e.id = replica_intervals.entry_id), 0)`.as(
        'usdPerGpuHour',
      ),
      'startedAt',
      sql<Date>`coalesce(ended_at, last_heartbeat_at)`.as('endAt'),
    ])
    .where('tenantId', '=', scope.tenantId)
    .where('startedAt', '<', scope.to)
    .where(sql<boolean>`coalesce(ended_at, last_heartbeat_at) > ${scope.from}`);
  if (scope.deploymentId !== undefined) q = q.where('deploymentId', '=', scope.deploymentId);
  if (ids !== undefined) q = q.where('deploymentId', 'in', ids);
  const rows = await q.execute();
  const out = new Map<string, { -readonly [K in keyof GpuPiece]: GpuPiece[K] }>();
  for (const r of rows) {
    let start = Math.max(new Date(r.startedAt).getTime(), scope.from.getTime());
    const end = Math.min(new Date(r.endAt).getTime(), scope.to.getTime());
    while (start < end) {
      const dayEnd = Math.min(end, (Math.floor(start / DAY_MS) + 1) * DAY_MS);
      const day = new Date(start).toISOString().slice(0, 10);
      const key = `${r.deploymentId}|${r.phase}|${day}`;
      const piece = out.get(key) ?? { deploymentId: r.deploymentId, entryId: r.entryId, phase: r.phase, day, gpuSeconds: 0, costUsd: 0 };
      const gpuSeconds = ((dayEnd - start) / 1000) * r.gpuCount;
      piece.gpuSeconds += gpuSeconds;
      piece.costUsd += (gpuSeconds / 3600) * r.usdPerGpuHour;
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

type PhaseSums = Record<ReplicaPhase, number>;

function gpuSecondsOfSums(sums: PhaseSums): GpuSeconds {
  const r = roundGpuSeconds;
  return { boot: r(sums.boot), serving: r(sums.serving), idle: r(sums.idle), total: r(sums.boot + sums.serving + sums.idle) };
}

/** GPU-seconds of a tenant (or one of its deployments) in [from, to), by phase. */
export async function gpuSecondsOf(db: Db, scope: GpuScope): Promise<GpuSeconds> {
  const sums: PhaseSums = { boot: 0, serving: 0, idle: 0 };
  for (const p of await gpuPieces(db, scope)) sums[p.phase] += p.gpuSeconds;
  return gpuSecondsOfSums(sums);
}

/** GPU-seconds in [from, to) of each of `deploymentIds` (of the tenant), in one query; a deployment without any is absent. */
export async function gpuSecondsByDeployment(db: Db, scope: GpuScope & { readonly deploymentIds: readonly string[] }): Promise<Map<string, GpuSeconds>> {
  const sums = new Map<string, PhaseSums>();
  for (const p of await gpuPieces(db, scope)) {
    const s = sums.get(p.deploymentId) ?? { boot: 0, serving: 0, idle: 0 };
    s[p.phase] += p.gpuSeconds;
    sums.set(p.deploymentId, s);
  }
  return new Map([...sums].map(([id, s]) => [id, gpuSecondsOfSums(s)]));
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

/**
 * A tenant's GPU time in [from, to) by entry and UTC day, each interval priced at the USD per GPU-hour its
 * entry had when the interval opened (none: $0), so a later price change never alters past cost.
 */
export async function gpuCosts(db: Db, scope: GpuScope): Promise<GpuCostRow[]> {
  const rows = new Map<string, { entryId: string; day: string; gpuSeconds: number; costUsd: number }>();
  for (const p of await gpuPieces(db, scope)) {
    const key = `${p.entryId}|${p.day}`;
    const row = rows.get(key) ?? { entryId: p.entryId, day: p.day, gpuSeconds: 0, costUsd: 0 };
    row.gpuSeconds += p.gpuSeconds;
    row.costUsd += p.costUsd;
    rows.set(key, row);
  }
  return [...rows.values()];
}
