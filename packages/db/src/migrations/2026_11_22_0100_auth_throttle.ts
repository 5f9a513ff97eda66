import { sql, type Kysely } from 'kysely';

// Login attempts per key (account, client IP, both), shared by every control-plane replica.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('auth_throttle')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('auth_throttle_window_start_idx').on('auth_throttle').column('window_start').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('auth_throttle').execute();
}
