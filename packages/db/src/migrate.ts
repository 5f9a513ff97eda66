import { Migrator, NO_MIGRATIONS, type Migration, type MigrationResultSet } from 'kysely/migration';
import type { Kysely } from 'kysely';
import * as m0001 from './migrations/2026_11_22_0001_initial.ts';
import * as m0100 from './migrations/2026_11_22_0100_auth_throttle.ts';
import * as m0200 from './migrations/2026_11_22_0200_invitations.ts';
import * as m0400 from './migrations/2026_11_22_0400_node_credentials.ts';
import * as m1000 from './migrations/2026_11_22_1000_serverless.ts';
import * as m1100 from './migrations/2026_11_22_1100_runtime_config.ts';
import * as m1200 from './migrations/2026_11_22_1200_interval_price.ts';
import * as m2912 from './migrations/2026_11_29_1200_admin_token_parent.ts';
import * as m2913 from './migrations/2026_11_29_1300_audit_tenant_id_index.ts';

// Static list, not FileMigrationProvider: works the same from source, a bundle or a container image.
const migrations: Readonly<Record<string, Migration>> = Object.freeze({
  '2026_11_22_0001_initial': m0001,
  '2026_11_22_0100_auth_throttle': m0100,
  '2026_11_22_0200_invitations': m0200,
  '2026_11_22_0400_node_credentials': m0400,
  '2026_11_22_1000_serverless': m1000,
  '2026_11_22_1100_runtime_config': m1100,
  '2026_11_22_1200_interval_price': m1200,
  '2026_11_29_1200_admin_token_parent': m2912,
  '2026_11_29_1300_audit_tenant_id_index': m2913,
});

/** Every migration's name, in the order they apply. */
export const migrationNames: readonly string[] = Object.freeze(Object.keys(migrations).sort());

function createMigrator(db: Kysely<any>): Migrator {
  // Migrations spell out snake_case names, so they run without the CamelCasePlugin.
  return new Migrator({ db: db.withoutPlugins(), provider: { getMigrations: async () => ({ ...migrations }) } });
}

function unwrap({ error, results }: MigrationResultSet): string[] {
  if (error) throw error instanceof Error ? error : new Error(`migration failed: ${String(error)}`);
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** Applies every pending migration; returns the names applied. Throws on failure. */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  return unwrap(await createMigrator(db).migrateToLatest());
}

/** Reverts the latest migration, or all of them with `{ all: true }`; returns the names reverted. */
export async function migrateDown(db: Kysely<any>, options: { readonly all?: boolean } = {}): Promise<string[]> {
  const migrator = createMigrator(db);
  return unwrap(options.all ? await migrator.migrateTo(NO_MIGRATIONS) : await migrator.migrateDown());
}
