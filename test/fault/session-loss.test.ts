// A PostgreSQL session that ends while its pooled client is checked out (a restart or failover in the
// middle of a transaction) must fail that transaction, not the process: node-postgres emits 'error' on
// such a client and pg-pool listens only on idle ones. Before createDb guarded every client, a node's
// load report in flight during a PostgreSQL restart killed the control plane (test/faults.test.ts).
// An uncaught 'error' here fails the run as an unhandled error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest, type Database } from '@infer/db';
import { startPrivatePostgres, type PrivateService } from './private-services.ts';

describe('a session lost under a checked-out client (private PostgreSQL)', () => {
  let pg: PrivateService;
  let database: Database;

  beforeAll(async () => {
    pg = await startPrivatePostgres();
    database = await createDb({ databaseUrl: pg.url, poolMax: 3 });
    await migrateToLatest(database.db);
  });
  afterAll(async () => {
    await database?.close();
    await pg?.close();
  });

  it('a transaction whose backend is terminated between statements rejects, and the pool keeps serving', async () => {
    const pool = database.pool!;
    const tx = database.db.transaction().execute(async (trx) => {
      const [me] = await trx.selectNoFrom((eb) => eb.fn<number>('pg_backend_pid').as('pid')).execute();
      // The server ends this session while the transaction holds it with no statement running: the
      // client gets the FATAL error and then the socket's end, both as 'error' events.
      await pool.query('select pg_terminate_backend($1)', [me!.pid]);
      for (;;) {
        const { rows } = await pool.query('select 1 from pg_stat_activity where pid = $1', [me!.pid]);
        if (rows.length === 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await trx.selectNoFrom((eb) => eb.lit(1).as('one')).execute();
    });
    await expect(tx).rejects.toThrow();
    const after = await database.db.selectNoFrom((eb) => eb.lit(1).as('one')).execute();
    expect(after).toEqual([{ one: 1 }]);
  });

  it('a restart of the server with transactions in flight leaves the process and the pool working', async () => {
    let stop = false;
    const failures: unknown[] = [];
    const loops = Array.from({ length: 3 }, async () => {
      while (!stop) {
        await database.db
          .transaction()
          .execute(async (trx) => {
            await trx.selectNoFrom((eb) => eb.lit(1).as('a')).execute();
            await new Promise((r) => setTimeout(r, 5));
            await trx.selectNoFrom((eb) => eb.lit(2).as('b')).execute();
          })
          .catch((err: unknown) => failures.push(err));
        await new Promise((r) => setTimeout(r, 1));
      }
    });
    await new Promise((r) => setTimeout(r, 200));
    await pg.restart();
    stop = true;
    await Promise.all(loops);
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        expect(await database.db.selectNoFrom((eb) => eb.lit(1).as('one')).execute()).toEqual([{ one: 1 }]);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    console.log(`PostgreSQL restarted under 3 transaction loops: ${failures.length} transaction(s) failed, process and pool fine`);
  });
});
