import { sql, type Kysely } from 'kysely';

// Serverless dedicated deployments (issue 10): autoscaling settings and decisions on the deployment,
// draining replicas, a dedicated GPU-hour price, the GPU-time ledger, observed cold starts and the
// nodes' latest load reports (kept in the database so any control-plane replica can take them).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table deployments drop constraint if exists deployments_state_check`.execute(db);
  await sql`alter table deployments add constraint deployments_state_check
    check (state in ('pending', 'provisioning', 'running', 'scaling', 'scaled_to_zero', 'stopped', 'failed'))`.execute(db);
  await sql`alter table deployments alter column min_replicas set default 0`.execute(db);
  await db.schema
    .alterTable('deployments')
    .addColumn('target_concurrency', 'integer', (c) => c.check(sql`target_concurrency >= 1`))
    .addColumn('scale_to_zero_after_seconds', 'integer', (c) =>
      c
        .notNull()
        .defaultTo(900)
        .check(sql`scale_to_zero_after_seconds >= 10`),
    )
    .addColumn('scale_down_delay_seconds', 'integer', (c) =>
      c
        .notNull()
        .defaultTo(60)
        .check(sql`scale_down_delay_seconds >= 0`),
    )
    .addColumn('desired_replicas', 'integer', (c) =>
      c
        .notNull()
        .defaultTo(0)
        .check(sql`desired_replicas >= 0`),
    )
    .addColumn('last_scale_reason', 'text')
    .addColumn('last_scale_at', 'timestamptz')
    .execute();
  // Existing deployments keep what they run: their minimum.
  await sql`update deployments set desired_replicas = min_replicas`.execute(db);

  await sql`alter table deployment_replicas drop constraint if exists deployment_replicas_state_check`.execute(db);
  await sql`alter table deployment_replicas add constraint deployment_replicas_state_check
    check (state in ('starting', 'ready', 'draining', 'failed', 'stopped'))`.execute(db);
  await db.schema
    .alterTable('deployment_replicas')
    .addColumn('ready_at', 'timestamptz')
    .addColumn('drain_started_at', 'timestamptz')
    .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();

  await db.schema.alterTable('catalog_entries').addColumn('dedicated_price_per_gpu_hour', 'double precision').execute();

  // The GPU-time ledger: no foreign keys, so billing outlives deleted deployments and replicas.
  await db.schema
    .createTable('replica_intervals')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('replica_id', 'uuid', (c) => c.notNull())
    .addColumn('deployment_id', 'uuid', (c) => c.notNull())
    .addColumn('tenant_id', 'uuid', (c) => c.notNull())
    .addColumn('entry_id', 'uuid', (c) => c.notNull())
    .addColumn('gpu_count', 'integer', (c) => c.notNull().check(sql`gpu_count >= 0`))
    .addColumn('phase', 'text', (c) => c.notNull().check(sql`phase in ('boot', 'serving', 'idle')`))
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('ended_at', 'timestamptz')
    .addColumn('last_heartbeat_at', 'timestamptz', (c) => c.notNull())
    .addCheckConstraint('replica_intervals_order', sql`ended_at is null or ended_at >= started_at`)
    .execute();
  // One open interval per replica: a second open one would double count.
  await sql`create unique index replica_intervals_open_idx on replica_intervals (replica_id) where ended_at is null`.execute(db);
  await db.schema.createIndex('replica_intervals_tenant_idx').on('replica_intervals').columns(['tenant_id', 'started_at']).execute();
  await db.schema.createIndex('replica_intervals_deployment_idx').on('replica_intervals').columns(['deployment_id', 'started_at']).execute();

  await db.schema
    .createTable('cold_starts')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('deployment_id', 'uuid', (c) => c.notNull())
    .addColumn('entry_id', 'uuid', (c) => c.notNull())
    .addColumn('node_id', 'text', (c) => c.notNull())
    .addColumn('wait_ms', 'double precision', (c) => c.notNull())
    .addColumn('ttft_ms', 'double precision', (c) => c.notNull())
    .addColumn('recorded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('cold_starts_entry_idx').on('cold_starts').columns(['entry_id', 'recorded_at']).execute();
  await db.schema.createIndex('cold_starts_deployment_idx').on('cold_starts').columns(['deployment_id', 'recorded_at']).execute();

  await db.schema
    .createTable('node_loads')
    .addColumn('node_id', 'text', (c) => c.notNull())
    .addColumn('deployment_id', 'uuid', (c) => c.notNull())
    .addColumn('in_flight', 'integer', (c) => c.notNull())
    .addColumn('held', 'integer', (c) => c.notNull())
    .addColumn('reported_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('node_loads_pk', ['node_id', 'deployment_id'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('node_loads').ifExists().execute();
  await db.schema.dropTable('cold_starts').ifExists().execute();
  await db.schema.dropTable('replica_intervals').ifExists().execute();
  await db.schema.alterTable('catalog_entries').dropColumn('dedicated_price_per_gpu_hour').execute();
  await db.schema.alterTable('deployment_replicas').dropColumn('ready_at').dropColumn('drain_started_at').dropColumn('attempt').execute();
  await sql`update deployment_replicas set state = 'stopped' where state = 'draining'`.execute(db);
  await sql`alter table deployment_replicas drop constraint if exists deployment_replicas_state_check`.execute(db);
  await sql`alter table deployment_replicas add constraint deployment_replicas_state_check
    check (state in ('starting', 'ready', 'failed', 'stopped'))`.execute(db);
  await db.schema
    .alterTable('deployments')
    .dropColumn('target_concurrency')
    .dropColumn('scale_to_zero_after_seconds')
    .dropColumn('scale_down_delay_seconds')
    .dropColumn('desired_replicas')
    .dropColumn('last_scale_reason')
    .dropColumn('last_scale_at')
    .execute();
  await sql`update deployments set state = 'running' where state in ('scaling', 'scaled_to_zero')`.execute(db);
  await sql`alter table deployments drop constraint if exists deployments_state_check`.execute(db);
  await sql`alter table deployments add constraint deployments_state_check
    check (state in ('pending', 'provisioning', 'running', 'stopped', 'failed'))`.execute(db);
  await sql`alter table deployments alter column min_replicas set default 1`.execute(db);
}
