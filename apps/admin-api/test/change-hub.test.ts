import { describe, expect, it } from 'vitest';
import { createDb } from '@infer/db';
import { createTestDb } from '@infer/db/testing';
import type { ConfigDelta } from '@infer/shared';
import { createChangeHub } from '../src/modules/snapshots/change-hub.ts';
import { postgresWakeSource } from '../src/modules/snapshots/pg-listen.ts';
import { recordChange } from '../src/modules/snapshots/snapshots.service.ts';

// Another control-plane replica writes through its own pool and never signals this process:
// only Postgres NOTIFY can wake the hub before its (here: very slow) poll.
describe.runIf(Boolean(process.env.DATABASE_URL))('change hub across replicas (postgres)', () => {
  it('learns of rows another replica committed via LISTEN/NOTIFY', async () => {
    const database = await createTestDb('postgres');
    const replica = await createDb({ databaseUrl: database.url!, poolMax: 2 });
    const hub = createChangeHub(database.db, { pollMs: 60_000, external: postgresWakeSource(database.pool!) });
    try {
      await hub.ready;
      const got: ConfigDelta[] = [];
      const arrived = new Promise<void>((resolve) => hub.subscribe((d) => (got.push(...d), resolve())));
      const tenant = await replica.db.insertInto('tenants').values({ slug: 'remote', name: 'Remote' }).returning('id').executeTakeFirstOrThrow();
      const started = performance.now();
      await replica.db.transaction().execute((trx) => recordChange(trx, 'tenant', tenant.id));
      await arrived;
      expect(performance.now() - started).toBeLessThan(500);
      expect(got[0]).toMatchObject({ kind: 'tenant', id: tenant.id, op: 'upsert', value: { slug: 'remote' } });
    } finally {
      await hub.close();
      await replica.close();
      await database.close();
    }
  });
});
