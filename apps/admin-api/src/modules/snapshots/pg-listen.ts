import type pg from 'pg';
import type { ExternalWakeSource } from './change-hub.ts';
import { OUTBOX_CHANNEL } from './snapshots.service.ts';

/**
 * LISTENs on the outbox channel over a client held out of the pool, so this replica learns of rows
 * another replica committed. Reconnects after a lost connection (the poll covers the gap).
 */
export function postgresWakeSource(pool: pg.Pool, onError?: (err: unknown) => void): ExternalWakeSource {
  return async (wake) => {
    let stopped = false;
    let client: pg.PoolClient | undefined;
    let retry: NodeJS.Timeout | undefined;
    let releaseCurrent: ((err?: Error | boolean) => void) | undefined;
    const onNotification = (): void => wake();
    const connect = async (): Promise<void> => {
      const c = await pool.connect();
      let released = false;
      const release = (err?: Error | boolean): void => {
        if (released) return;
        released = true;
        c.off('notification', onNotification);
        c.release(err);
      };
      client = c;
      c.on('notification', onNotification);
      // Kept for the client's whole life: an error after release (the server ending the session) must
      // not become an uncaught exception.
      c.on('error', (err) => {
        if (released) return;
        onError?.(err);
        release(err);
        if (client === c) client = undefined;
        if (!stopped) retry = setTimeout(() => void connect().catch((e: unknown) => onError?.(e)), 1000);
      });
      releaseCurrent = release;
      await c.query(`LISTEN ${OUTBOX_CHANNEL}`);
      wake(); // rows may have landed while we were away
    };
    await connect();
    return async () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      const c = client;
      client = undefined;
      if (c) {
        await c.query(`UNLISTEN ${OUTBOX_CHANNEL}`).catch(() => undefined);
        releaseCurrent?.(true);
      }
    };
  };
}
