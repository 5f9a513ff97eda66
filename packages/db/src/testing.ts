import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDb, type Database, type DatabaseKind } from './create-db.ts';
import { migrateToLatest } from './migrate.ts';

/** A migrated database of its own for one test file; `url` is set for postgres. */
export interface TestDatabase extends Database {
  /** Connection URL of the fresh database (postgres only), for servers started by the test. */
  readonly url?: string;
}

/** The backends to run database tests on: always 'pglite', plus 'postgres' when DATABASE_URL is set. */
export function testBackends(): DatabaseKind[] {
  return process.env.DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];
}

/**
 * Creates an isolated, migrated database: in-memory PGlite, or a fresh `t_<random>` database on
 * the server in DATABASE_URL that `close()` drops.
 */
export async function createTestDb(kind: DatabaseKind = 'pglite'): Promise<TestDatabase> {
  if (kind === 'pglite') {
    const database = await createDb();
    await migrateToLatest(database.db);
    return database;
  }

  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) throw new Error("createTestDb('postgres') needs DATABASE_URL");
  const name = `t_${randomBytes(8).toString('hex')}`;
  await withAdminClient(serverUrl, (client) => client.query(`create database "${name}"`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;

  let database: Database;
  try {
    database = await createDb({ databaseUrl: url.toString(), poolMax: 5 });
    await migrateToLatest(database.db);
  } catch (error) {
    await dropDatabase(serverUrl, name);
    throw error;
  }
  let closed: Promise<void> | undefined;
  return Object.freeze({
    ...database,
    url: url.toString(),
    close: () =>
      (closed ??= (async () => {
        await database.close();
        await dropDatabase(serverUrl, name);
      })()),
  });
}

async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  await withAdminClient(serverUrl, (client) => client.query(`drop database if exists "${name}" with (force)`));
}

async function withAdminClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
