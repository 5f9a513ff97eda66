import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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
    const database = await createDb({ loadDataDir: await pgliteTemplate() });
    await migrateToLatest(database.db); // nothing to do, unless the template is behind the migrations
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

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));
const CACHE_DIR = join(PACKAGE_ROOT, 'node_modules/.cache/infer-db');
let template: Promise<Blob> | undefined;

/**
 * A migrated, empty PGlite data folder to start test databases from. PGlite's initdb (an empty cluster, in
 * WebAssembly) takes 2.5-4 s on a 2-core machine, loading a dump about 1 s, and the test files make some forty
 * databases in processes of their own: the first one to need it migrates a database and dumps it to a file named
 * by a hash of the migrations and the PGlite version (written whole: a reader never sees half of it), and every
 * later one loads that file.
 */
function pgliteTemplate(): Promise<Blob> {
  return (template ??= (async () => {
    const file = join(CACHE_DIR, `pglite-template-${await templateKey()}.tar`);
    try {
      return new Blob([await readFile(file)]);
    } catch {
      // Not made yet (or unreadable): make it.
    }
    const database = await createDb();
    try {
      await migrateToLatest(database.db);
      const dump = await database.pglite!.dumpDataDir('none');
      await mkdir(CACHE_DIR, { recursive: true, mode: 0o700 });
      const partial = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
      try {
        await writeFile(partial, Buffer.from(await dump.arrayBuffer()), { mode: 0o600 });
        await rename(partial, file);
      } finally {
        await rm(partial, { force: true });
      }
      return dump;
    } finally {
      await database.close();
    }
  })());
}

/** What a template depends on: every migration's source and the PGlite release. */
async function templateKey(): Promise<string> {
  const hash = createHash('sha256');
  const migrations = join(PACKAGE_ROOT, 'src/migrations');
  for (const name of (await readdir(migrations)).sort()) hash.update(name).update(await readFile(join(migrations, name)));
  hash.update(await readFile(join(PACKAGE_ROOT, 'node_modules/@electric-sql/pglite/package.json')));
  return hash.digest('hex').slice(0, 16);
}
