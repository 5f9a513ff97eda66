import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest, migrationNames } from '../src/index.ts';

describe('file-backed PGlite', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('keeps data across close and reopen', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'infer-db-'));
    dirs.push(dir);
    const dataDir = join(dir, 'pgdata');

    const first = await createDb({ dataDir });
    expect(first.kind).toBe('pglite');
    expect(await migrateToLatest(first.db)).toEqual(migrationNames);
    await first.db.insertInto('tenants').values({ slug: 'persisted', name: 'P' }).execute();
    await first.db
      .insertInto('configOutbox')
      .values({ kind: 'tenant', entityId: 'persisted', op: 'upsert', payload: { a: 1 } })
      .execute();
    await first.close();
    await first.close(); // idempotent

    const second = await createDb({ dataDir });
    expect(await migrateToLatest(second.db)).toEqual([]);
    const tenant = await second.db.selectFrom('tenants').select(['slug', 'createdAt']).executeTakeFirstOrThrow();
    expect(tenant.slug).toBe('persisted');
    expect(tenant.createdAt).toBeInstanceOf(Date);
    const outbox = await second.db.selectFrom('configOutbox').select(['seq', 'payload']).executeTakeFirstOrThrow();
    expect(outbox).toEqual({ seq: 1, payload: { a: 1 } });
    await second.close();
  });

  it('closes an instance that never ran a query', async () => {
    const database = await createDb();
    await database.close();
    expect(database.pglite?.closed).toBe(true);
  });
});
