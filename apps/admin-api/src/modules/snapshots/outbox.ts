import { EventEmitter } from 'node:events';
import type { Db } from '../../db.ts';

/**
 * In-process signal: fires after a transaction that wrote outbox rows commits. Hubs of every app in
 * this process listen; a wake-up for another database only costs one cheap query.
 */
export const outboxSignal = new EventEmitter();
outboxSignal.setMaxListeners(0);

const changedTransactions = new WeakSet<object>();

/** Marks a transaction as having written outbox rows, so its commit wakes the hubs. */
export function markChanged(trx: Db): void {
  changedTransactions.add(trx);
}

/**
 * Runs `fn` in a transaction, or inside the caller's when `db` already is one. The outermost call
 * signals the hubs once it has committed.
 */
export async function withTransaction<T>(db: Db, fn: (trx: Db) => Promise<T>): Promise<T> {
  if (db.isTransaction) return fn(db);
  for (let attempt = 1; ; attempt++) {
    let used: Db | undefined;
    try {
      const result = await db.transaction().execute(async (trx) => {
        used = trx;
        return fn(trx);
      });
      if (used && changedTransactions.has(used)) outboxSignal.emit('change');
      return result;
    } catch (err) {
      // PostgreSQL chose this transaction as a deadlock's victim (or a serialization failure): it was rolled back
      // whole, so it runs again (a user's stop racing the reconciler's replica start, say).
      const code = (err as { code?: unknown }).code;
      if (attempt >= 3 || (code !== '40P01' && code !== '40001')) throw err;
    }
  }
}
