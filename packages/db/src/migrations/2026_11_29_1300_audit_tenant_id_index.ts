import { sql, type Kysely } from 'kysely';

// A tenant's audit log is listed newest first by id: with only (tenant_id, created_at) indexed, PostgreSQL walked the
// primary key backwards over every tenant's rows to find one tenant's few (a million rows read for two).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index if not exists audit_log_tenant_id_idx on audit_log (tenant_id, id desc)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('audit_log_tenant_id_idx').ifExists().execute();
}
