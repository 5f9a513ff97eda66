import { chmod, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite, types as pgliteTypes } from '@electric-sql/pglite';
import { CamelCasePlugin, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DB } from './database.ts';
import { trimTrailingSlashes } from '@infer/shared';
import { releasePidLock, takePidLock } from '@infer/shared/pid-lock';
import { createPGliteDialect } from './pglite-dialect.ts';

export type DatabaseKind = 'pglite' | 'postgres';

export interface CreateDbOptions {
  /** A postgres:// URL; when given, node-postgres is used and `dataDir` is ignored. */
  readonly databaseUrl?: string;
  /** PGlite data folder (created if missing); in-memory when absent. */
  readonly dataDir?: string;
  /** PGlite in memory only: start from this data folder, as PGlite's `dumpDataDir` wrote it, instead of an empty cluster. */
  readonly loadDataDir?: Blob;
  /** node-postgres pool size (default 10). */
  readonly poolMax?: number;
  /** Told of errors on idle pooled connections (they are discarded and replaced on demand). */
  readonly onIdleError?: (err: Error) => void;
}

/** A PGlite data folder another live process has open (PGlite admits one process at a time). */
export class DataDirInUseError extends Error {
  readonly dataDir: string;
  readonly holderPid: number;
  constructor(dataDir: string, holderPid: number) {
    super(`the embedded database ${dataDir} is open in another process (pid ${holderPid}); it admits one process at a time`);
    this.name = 'DataDirInUseError';
    this.dataDir = dataDir;
    this.holderPid = holderPid;
  }
}

/** An open database: the typed Kysely instance and what is needed to close it. */
export interface Database {
  readonly db: Kysely<DB>;
  readonly kind: DatabaseKind;
  /** The embedded instance (LISTEN/NOTIFY, dumps); only for kind 'pglite'. */
  readonly pglite?: PGlite;
  /** The node-postgres pool (LISTEN/NOTIFY needs a dedicated client); only for kind 'postgres'. */
  readonly pool?: pg.Pool;
  /** Destroys the Kysely instance and closes the pool or the PGlite instance. Idempotent. */
  close(): Promise<void>;
}

const OID_INT8 = 20;
const OID_NUMERIC = 1700;
const OID_INT8_ARRAY = 1016;
const OID_NUMERIC_ARRAY = 1231;

// Counts (bigserial, sum(), count()) and numerics come back as JS numbers on both backends.
// Values beyond Number.MAX_SAFE_INTEGER lose precision; none of ours get near it.
const pgTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary') {
      if (oid === OID_INT8 || oid === OID_NUMERIC) return Number;
      if (oid === OID_INT8_ARRAY || oid === OID_NUMERIC_ARRAY) {
        const parseTextArray = pg.types.getTypeParser(1009 as Parameters<typeof pg.types.getTypeParser>[0], 'text') as (value: string) => (string | null)[];
        return (value: string) => parseTextArray(value).map((v) => (v === null ? null : Number(v)));
      }
    }
    return pg.types.getTypeParser(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};

const pgliteParsers = {
  [pgliteTypes.INT8]: Number,
  [pgliteTypes.NUMERIC]: Number,
};

const camelCase = new CamelCasePlugin();

/**
 * node-postgres emits 'error' on a client whose session ends (restart, failover) even while it is
 * checked out, and pg-pool listens only on idle clients: a transaction that is sending ROLLBACK when
 * the server goes away would crash the process with an unhandled 'error'. The query in flight
 * already rejects with the cause, and the pool discards a client that is no longer queryable when
 * it is released, so the event itself needs no handling beyond this listener.
 */
function guardCheckedOutClients(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
}

/**
 * Opens the database: node-postgres when `databaseUrl` is given, else embedded PGlite (file-backed
 * at `dataDir`, or in-memory). Does not migrate; call `migrateToLatest(database.db)`.
 */
export async function createDb(options: CreateDbOptions = {}): Promise<Database> {
  if (options.databaseUrl) {
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: options.poolMax ?? 10, types: pgTypes });
    // An idle client whose session the server ends (restart, failover, a dropped test database) is
    // discarded by the pool; without a listener its 'error' would crash the process.
    pool.on('error', (err) => options.onIdleError?.(err));
    guardCheckedOutClients(pool);
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }), plugins: [camelCase] });
    return Object.freeze({ db, kind: 'postgres' as const, pool, close: once(() => db.destroy()) });
  }

  const dataDir = options.dataDir;
  if (dataDir && options.loadDataDir) throw new Error('createDb: loadDataDir is for an in-memory database only');
  // Two processes on one PGlite folder corrupt it: a pid lock beside the folder (`<dataDir>.lock`) refuses the second
  // (a control plane and `admin:create`, two `pnpm start`s), and is taken over from a process that died.
  const lock = dataDir ? `${trimTrailingSlashes(dataDir)}.lock` : null;
  if (dataDir && lock) {
    await lockDown(dataDir, true);
    const holder = takePidLock(lock);
    if (holder !== null) throw new DataDirInUseError(dataDir, holder);
  }
  let pglite: PGlite | undefined;
  try {
    pglite = await PGlite.create({ dataDir, parsers: pgliteParsers, ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}) });
    // PGlite's file system creates files 0666 and folders 0777 (less the umask): tighten what initdb wrote.
    if (dataDir) await lockDown(dataDir, false);
  } catch (err) {
    if (pglite && !pglite.closed) await pglite.close().catch(() => undefined);
    if (lock) releasePidLock(lock);
    throw err;
  }
  const opened = pglite;
  const db = new Kysely<DB>({ dialect: createPGliteDialect(opened), plugins: [camelCase] });
  return Object.freeze({
    db,
    kind: 'pglite' as const,
    pglite: opened,
    close: once(async () => {
      try {
        await db.destroy();
        // destroy() only reaches the driver once a query has initialised it.
        if (!opened.closed) await opened.close();
        // Files PGlite created while open (new relations, WAL) are tightened too; the 0700 folder kept them
        // out of reach meanwhile.
        if (dataDir) await lockDown(dataDir, false);
      } finally {
        if (lock) releasePidLock(lock);
      }
    }),
  });
}

/**
 * The database folder is the owner's alone: folders 0700, files 0600, whatever the umask or whoever made
 * the folder. `createOnly` creates (or tightens) the folder itself without walking it.
 */
async function lockDown(dir: string, createOnly: boolean): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  if (createOnly) return;
  const walk = async (folder: string): Promise<void> => {
    for (const entry of await readdir(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) {
        await chmod(path, 0o700);
        await walk(path);
      } else if (entry.isFile()) await chmod(path, 0o600);
    }
  };
  await walk(dir);
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= fn());
}
