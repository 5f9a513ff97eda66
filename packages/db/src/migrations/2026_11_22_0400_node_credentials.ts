import { sql, type Kysely } from 'kysely';

// One credential per data-plane node (config feed, usage ingest): revocable on its own, unlike the
// bootstrap NODE_TOKEN every node of a small install shares.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('node_credentials')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_by', 'uuid', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('node_credentials').ifExists().execute();
}
