import { sql, type Kysely } from 'kysely';

// GPU time is billed at the price in force when it ran: each ledger interval keeps its entry's USD per
// GPU-hour from the moment it opened, so a later price change never reprices past time.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('replica_intervals').addColumn('usd_per_gpu_hour', 'double precision').execute();
  // Intervals recorded before: the price they have been billed at so far, their entry's current one (none: $0).
  await sql`update replica_intervals set usd_per_gpu_hour = coalesce(
    (select e.dedicated_price_per_gpu_hour from catalog_entries e where e.id = replica_intervals.entry_id), 0)`.execute(db);
  // Left nullable: a control plane still on the code before this (a rolling deploy) inserts intervals without it, and
  // those are priced as before, at their entry's current price (gpu-ledger.ts). Make it NOT NULL a release later.
  await db.schema
    .alterTable('replica_intervals')
    .addCheckConstraint('replica_intervals_price', sql`usd_per_gpu_hour >= 0`)
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('replica_intervals').dropColumn('usd_per_gpu_hour').execute();
}
