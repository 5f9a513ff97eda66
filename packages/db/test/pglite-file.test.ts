import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDb, DataDirInUseError, migrateToLatest, migrationNames } from '../src/index.ts';

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

  it('refuses a folder another live process has open, takes one over from a process that died, and frees it on close', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'infer-db-'));
    dirs.push(dir);
    const dataDir = join(dir, 'pgdata');
    const lock = `${dataDir}.lock`;
    // Another process (this one's parent, alive) holds it: refused before PGlite touches the folder.
    await writeFile(lock, String(process.ppid));
    const refused = await createDb({ dataDir }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DataDirInUseError);
    expect((refused as DataDirInUseError).holderPid).toBe(process.ppid);
    expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(false);
    // A process that died left it: taken over.
    await writeFile(lock, '2147483646');
    const database = await createDb({ dataDir });
    expect(await readFile(lock, 'utf8')).toBe(String(process.pid));
    await migrateToLatest(database.db);
    await database.close();
    expect(existsSync(lock)).toBe(false);
  });
});
