import type { Kysely } from 'kysely';

// Kubernetes provisioner (issue 11): how a catalog entry's dedicated replicas run (runtime, image,
// model source, extra args), set by platform admins; null means the provisioner's defaults.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('catalog_entries').addColumn('runtime_config', 'jsonb').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('catalog_entries').dropColumn('runtime_config').execute();
}
