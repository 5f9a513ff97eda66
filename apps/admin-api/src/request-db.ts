import { CamelCasePlugin, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Db, DbKind } from './db.ts';

export interface RequestDb {
  /** What tRPC procedures and GraphQL resolvers query through. */
  readonly db: Db;
  close(): Promise<void>;
}

/**
 * The database as seen by API callers (tRPC, GraphQL). On PostgreSQL it is a pool of its own whose
 * sessions carry `statement_timeout`, so no caller's query (an aggregate over a year of usage, say)
 * holds a connection for longer than `timeoutMs`; the app's own work (config feed, usage ingest,
 * pruning, migrations) keeps the main pool without that limit. PGlite runs statements inside this
 * process with no timer to interrupt them, so there the operation size and cost limits are what
 * bound the work, and the main instance is shared.
 */
export function createRequestDb(opts: { db: Db; kind: DbKind; pool?: pg.Pool; timeoutMs: number }): RequestDb {
  if (opts.kind !== 'postgres' || !opts.pool || opts.timeoutMs <= 0) return { db: opts.db, close: async () => {} };
  const base = opts.pool.options;
  // A caller waits for a connection at most twice the statement timeout: past it the request is answered 503 with
  // Retry-After (a busy database), not left waiting behind others' aggregates without end.
  const pool = new pg.Pool({
    ...base,
    max: Math.max(2, Math.ceil((base.max ?? 10) / 2)),
    statement_timeout: opts.timeoutMs,
    connectionTimeoutMillis: Math.max(1000, 2 * opts.timeoutMs),
  });
  // An idle client the server drops must not crash the process (the pool replaces it on demand).
  pool.on('error', () => {});
  // ...and neither may a checked-out one (pg-pool listens only on idle clients; see @infer/db createDb).
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] }) as Db;
  return { db, close: () => db.destroy() };
}
