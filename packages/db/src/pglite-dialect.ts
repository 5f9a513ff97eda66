import type { PGlite } from '@electric-sql/pglite';
import {
  AbortedTransactionError,
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

/**
 * A Kysely dialect over one PGlite instance. PGlite is a single connection, so the driver hands it
 * out under a mutex: a transaction holds it from BEGIN to COMMIT and other queries wait.
 * `destroy()` closes the PGlite instance.
 */
export function createPGliteDialect(pglite: PGlite): Dialect {
  return {
    createAdapter: (): DialectAdapter => new PostgresAdapter(),
    createDriver: (): Driver => new PGliteDriver(pglite),
    createIntrospector: (db: Kysely<any>): DatabaseIntrospector => new PostgresIntrospector(db),
    createQueryCompiler: (): QueryCompiler => new PostgresQueryCompiler(),
  };
}

function createMutex(): { lock(): Promise<void>; unlock(): void } {
  let tail: Promise<void> = Promise.resolve();
  let release: (() => void) | undefined;
  return {
    async lock() {
      const previous = tail;
      let unlock!: () => void;
      tail = new Promise<void>((resolve) => (unlock = resolve));
      await previous;
      release = unlock;
    },
    unlock() {
      const r = release;
      release = undefined;
      r?.();
    },
  };
}

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;

class PGliteDriver implements Driver {
  readonly #pglite: PGlite;
  readonly #connection: PGliteConnection;
  readonly #mutex = createMutex();

  constructor(pglite: PGlite) {
    this.#pglite = pglite;
    this.#connection = new PGliteConnection(pglite);
  }

  async init(): Promise<void> {
    await this.#pglite.waitReady;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.#mutex.lock();
    return this.#connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    let text = 'begin';
    if (settings.isolationLevel || settings.accessMode) {
      text = 'start transaction';
      if (settings.isolationLevel) text += ` isolation level ${settings.isolationLevel}`;
      if (settings.accessMode) text += ` ${settings.accessMode}`;
    }
    await connection.executeQuery(CompiledQuery.raw(text));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const { rows } = await connection.executeQuery<{ command?: string }>(CompiledQuery.raw('commit'));
    if (rows[0]?.command === 'ROLLBACK') throw new AbortedTransactionError();
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoteIdent(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${quoteIdent(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${quoteIdent(name)}`));
  }

  async releaseConnection(): Promise<void> {
    this.#mutex.unlock();
  }

  async destroy(): Promise<void> {
    if (!this.#pglite.closed) await this.#pglite.close();
  }
}

const affectingCommands = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

class PGliteConnection implements DatabaseConnection {
  readonly #pglite: PGlite;

  constructor(pglite: PGlite) {
    this.#pglite = pglite;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.#pglite.query<R>(compiledQuery.sql, [...compiledQuery.parameters], {
      rowMode: 'object',
    });
    const command = result.command?.toUpperCase();
    // Same shape as Kysely's PostgresConnection, so commitTransaction can detect an aborted COMMIT.
    if (command === 'COMMIT' || command === 'ROLLBACK') return { rows: [{ command } as R] };
    return {
      rows: result.rows,
      numAffectedRows: command && affectingCommands.has(command) ? BigInt(result.affectedRows ?? 0) : undefined,
    };
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery, chunkSize: number): AsyncIterableIterator<QueryResult<R>> {
    // PGlite has no cursors over its in-process protocol; read the result once and yield it in chunks.
    const { rows } = await this.executeQuery<R>(compiledQuery);
    for (let i = 0; i < rows.length; i += chunkSize) yield { rows: rows.slice(i, i + chunkSize) };
  }
}
