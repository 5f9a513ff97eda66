import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateDown, migrateToLatest, migrationNames } from '../src/index.ts';
import { createTestDb, testBackends, type TestDatabase } from '../src/testing.ts';

describe.each(testBackends())('db on %s', (kind) => {
  let database: TestDatabase;
  const db = () => database.db;

  beforeAll(async () => {
    database = await createTestDb(kind);
  });
  afterAll(async () => {
    await database?.close();
  });

  async function seedTenant(slug = `t-${Math.random().toString(36).slice(2, 10)}`) {
    return db()
      .insertInto('tenants')
      .values({ slug, name: `Tenant ${slug}` })
      .returningAll()
      .executeTakeFirstOrThrow();
  }
  async function seedUser(email = `u${Math.random().toString(36).slice(2, 10)}@example.com`) {
    return db().insertInto('users').values({ email, passwordHash: 'scrypt$x' }).returningAll().executeTakeFirstOrThrow();
  }
  async function seedEntry(name = `model-${Math.random().toString(36).slice(2, 10)}`) {
    return db().insertInto('catalogEntries').values({ name }).returningAll().executeTakeFirstOrThrow();
  }

  it('migrates down and up again', async () => {
    expect(await migrateDown(db(), { all: true })).toEqual([...migrationNames].reverse());
    const { count } = await db()
      .withoutPlugins()
      .selectFrom('information_schema.tables' as never)
      .select(sql<number>`count(*)`.as('count'))
      .where(sql.ref('table_schema'), '=', 'public')
      .where(sql.ref('table_name'), 'not like', 'kysely_%')
      .executeTakeFirstOrThrow();
    expect(count).toBe(0);
    expect(await migrateToLatest(db())).toEqual(migrationNames);
    expect(await migrateToLatest(db())).toEqual([]);
  });

  it('stores tenants, users, memberships and sessions with defaults and dates', async () => {
    const tenant = await seedTenant('acme');
    expect(tenant.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(tenant.createdAt).toBeInstanceOf(Date);
    expect(tenant.rpmLimit).toBeNull();

    const user = await seedUser('alice@example.com');
    expect(user.isPlatformAdmin).toBe(false);
    expect(user.displayName).toBeNull();

    await db().insertInto('memberships').values({ tenantId: tenant.id, userId: user.id, role: 'owner' }).execute();
    const expiresAt = new Date(Date.now() + 86_400_000);
    await db()
      .insertInto('sessions')
      .values({ id: 'a'.repeat(64), userId: user.id, expiresAt })
      .execute();

    const row = await db()
      .selectFrom('sessions')
      .innerJoin('memberships', 'memberships.userId', 'sessions.userId')
      .select(['sessions.expiresAt', 'memberships.role', 'memberships.tenantId'])
      .where('sessions.id', '=', 'a'.repeat(64))
      .executeTakeFirstOrThrow();
    expect(row.expiresAt).toBeInstanceOf(Date);
    expect(row.expiresAt.getTime()).toBe(expiresAt.getTime());
    expect(row).toMatchObject({ role: 'owner', tenantId: tenant.id });

    await expect(
      db()
        .insertInto('memberships')
        .values({ tenantId: tenant.id, userId: user.id, role: 'admin' as 'owner' })
        .execute(),
    ).rejects.toThrow();
    await expect(db().insertInto('users').values({ email: 'Bob@Example.com', passwordHash: 'x' }).execute()).rejects.toThrow();
  });

  it('stores keys and admin tokens', async () => {
    const tenant = await seedTenant();
    const user = await seedUser();
    const key = await db()
      .insertInto('apiKeys')
      .values({ tenantId: tenant.id, name: 'ci', prefix: 'sk-abc', hash: 'h1', createdBy: user.id, rpmLimit: 60 })
      .returningAll()
      .executeTakeFirstOrThrow();
    expect(key).toMatchObject({ rpmLimit: 60, tpmLimit: null, revokedAt: null, expiresAt: null });
    const revokedAt = new Date('2026-01-02T03:04:05.678Z');
    await db().updateTable('apiKeys').set({ revokedAt }).where('id', '=', key.id).execute();
    const revoked = await db().selectFrom('apiKeys').select('revokedAt').where('id', '=', key.id).executeTakeFirstOrThrow();
    expect(revoked.revokedAt).toEqual(revokedAt);

    const token = await db().insertInto('adminTokens').values({ name: 'infra', hash: 'th1', userId: user.id }).returningAll().executeTakeFirstOrThrow();
    expect(token).toMatchObject({ tenantId: null, prefix: null, lastUsedAt: null });

    // created_by is set null when the user goes; the admin token goes with its user.
    await db().deleteFrom('users').where('id', '=', user.id).execute();
    expect((await db().selectFrom('apiKeys').select('createdBy').where('id', '=', key.id).executeTakeFirstOrThrow()).createdBy).toBeNull();
    expect(await db().selectFrom('adminTokens').select('id').where('id', '=', token.id).execute()).toEqual([]);
  });

  it('stores catalog entries with arrays, doubles and browse queries', async () => {
    const entry = await db()
      .insertInto('catalogEntries')
      .values({
        name: 'Qwen3-Coder-480B',
        provider: 'qwen',
        parameterSizeB: 480,
        gpuCount: 8,
        contextLength: 262_144,
        concurrency: 1.5,
        coldStartSeconds: 42.5,
        priceInputPerM: 0.25,
        priceOutputPerM: 1.2,
        useCases: ['coding', 'agents'],
        tags: ['claude-code', 'cline'],
        offeredDedicated: true,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    expect(entry).toMatchObject({
      concurrency: 1.5,
      coldStartSeconds: 42.5,
      priceInputPerM: 0.25,
      useCases: ['coding', 'agents'],
      tags: ['claude-code', 'cline'],
      offeredShared: true,
      offeredDedicated: true,
      published: true,
      summary: null,
    });
    expect(entry.updatedAt).toBeInstanceOf(Date);

    const bare = await seedEntry();
    expect(bare.tags).toEqual([]);
    expect(bare.useCases).toEqual([]);

    const byTag = await db()
      .selectFrom('catalogEntries')
      .select('name')
      .where(sql<boolean>`tags @> ${sql.val(['cline'])}::text[]`)
      .execute();
    expect(byTag.map((r) => r.name)).toEqual(['Qwen3-Coder-480B']);
    const byUseCase = await db()
      .selectFrom('catalogEntries')
      .select('name')
      .where(sql<boolean>`${'agents'} = any(use_cases)`)
      .execute();
    expect(byUseCase.map((r) => r.name)).toEqual(['Qwen3-Coder-480B']);

    await expect(db().insertInto('catalogEntries').values({ name: 'Qwen3-Coder-480B' }).execute()).rejects.toThrow();
  });

  it('stores upstreams, deployments and replicas; restricts deleting a deployed entry', async () => {
    const tenant = await seedTenant();
    const entry = await seedEntry();
    const upstream = await db()
      .insertInto('endpointUpstreams')
      .values({ entryId: entry.id, url: 'http://127.0.0.1:9000', kind: 'sim', servedModel: entry.name })
      .returningAll()
      .executeTakeFirstOrThrow();
    expect(upstream).toMatchObject({ weight: 1, apiKey: null });
    await expect(
      db()
        .insertInto('endpointUpstreams')
        .values({ entryId: entry.id, url: 'http://x', kind: 'bogus' as 'sim', servedModel: 'm' })
        .execute(),
    ).rejects.toThrow();

    const deployment = await db()
      .insertInto('deployments')
      .values({ tenantId: tenant.id, entryId: entry.id, state: 'pending' })
      .returningAll()
      .executeTakeFirstOrThrow();
    expect(deployment).toMatchObject({ minReplicas: 0, maxReplicas: 1, provisioner: 'local', externalUrl: null });
    await expect(db().insertInto('deployments').values({ tenantId: tenant.id, entryId: entry.id, state: 'pending' }).execute()).rejects.toThrow();

    await db()
      .insertInto('deploymentReplicas')
      .values({ deploymentId: deployment.id, url: 'http://127.0.0.1:9001', kind: 'sim', servedModel: 'm', state: 'ready', pid: 123, port: 9001 })
      .execute();

    await expect(db().deleteFrom('catalogEntries').where('id', '=', entry.id).execute()).rejects.toThrow();

    await db().deleteFrom('deployments').where('id', '=', deployment.id).execute();
    expect(await db().selectFrom('deploymentReplicas').select('id').where('deploymentId', '=', deployment.id).execute()).toEqual([]);
    await db().deleteFrom('catalogEntries').where('id', '=', entry.id).execute();
    expect(await db().selectFrom('endpointUpstreams').select('id').where('entryId', '=', entry.id).execute()).toEqual([]);
  });

  it("backfills each GPU-time interval's price from its entry's current one ($0 when unpriced or gone)", async () => {
    // Back to before the price column, one migration at a time (those after it first).
    const fromPrice = migrationNames.slice(migrationNames.indexOf('2026_11_22_1200_interval_price'));
    for (const name of [...fromPrice].reverse()) expect(await migrateDown(db())).toEqual([name]);
    const priced = await db()
      .insertInto('catalogEntries')
      .values({ name: 'priced-8b', dedicatedPricePerGpuHour: 2.5 })
      .returning('id')
      .executeTakeFirstOrThrow();
    const unpriced = await seedEntry();
    const tenant = await seedTenant();
    const ids = { priced: priced.id, unpriced: unpriced.id, gone: '00000000-0000-4000-8000-000000000000' };
    for (const entryId of Object.values(ids)) {
      await sql`insert into replica_intervals (replica_id, deployment_id, tenant_id, entry_id, gpu_count, phase, started_at, last_heartbeat_at)
        values (gen_random_uuid(), gen_random_uuid(), ${tenant.id}, ${entryId}, 1, 'serving', now(), now())`.execute(db());
    }
    expect(await migrateToLatest(db())).toEqual(fromPrice);
    const price = async (entryId: string) =>
      (await db().selectFrom('replicaIntervals').select('usdPerGpuHour').where('entryId', '=', entryId).executeTakeFirstOrThrow()).usdPerGpuHour;
    expect([await price(ids.priced), await price(ids.unpriced), await price(ids.gone)]).toEqual([2.5, 0, 0]);
    // A control plane still on the code before the column (a rolling deploy) can still open intervals.
    await sql`insert into replica_intervals (replica_id, deployment_id, tenant_id, entry_id, gpu_count, phase, started_at, last_heartbeat_at)
      values (gen_random_uuid(), gen_random_uuid(), ${tenant.id}, ${ids.priced}, 1, 'boot', now(), now())`.execute(db());
    await db().deleteFrom('replicaIntervals').where('tenantId', '=', tenant.id).execute();
  });

  it('numbers the outbox with JS numbers and round-trips jsonb', async () => {
    const rows = await db()
      .insertInto('configOutbox')
      .values([
        { kind: 'tenant', entityId: 'a', op: 'upsert', payload: { slug: 'a', limits: [1, 2], nested: { ok: true } } },
        { kind: 'key', entityId: 'b', op: 'delete', payload: null },
      ])
      .returning(['seq', 'payload', 'createdAt'])
      .execute();
    expect(typeof rows[0]?.seq).toBe('number');
    expect(rows[1]!.seq).toBe(rows[0]!.seq + 1);
    expect(rows[0]?.payload).toEqual({ slug: 'a', limits: [1, 2], nested: { ok: true } });
    expect(rows[1]?.payload).toBeNull();
    expect(rows[0]?.createdAt).toBeInstanceOf(Date);

    const { maxSeq, total } = await db()
      .selectFrom('configOutbox')
      .select((eb) => [eb.fn.max('seq').as('maxSeq'), eb.fn.countAll().as('total')])
      .executeTakeFirstOrThrow();
    expect(maxSeq).toBe(rows[1]!.seq);
    expect(total).toBe(2);

    const audit = await db()
      .insertInto('auditLog')
      .values({ action: 'tenant.create', targetType: 'tenant', targetId: 'a', detail: { by: 'test' } })
      .returningAll()
      .executeTakeFirstOrThrow();
    expect(typeof audit.id).toBe('number');
    expect(audit.detail).toEqual({ by: 'test' });

    const { n } = await db()
      .selectNoFrom(sql<number>`1.25::numeric`.as('n'))
      .executeTakeFirstOrThrow();
    expect(n).toBe(1.25);
  });

  it('ingests usage idempotently on request_id', async () => {
    const tenant = await seedTenant();
    const startedAt = new Date('2026-03-01T10:00:00.123Z');
    const record = {
      requestId: 'req-1',
      tenantId: tenant.id,
      mode: 'shared' as const,
      model: 'm',
      promptTokens: 10,
      completionTokens: 20,
      status: 200,
      ttftMs: 12.5,
      latencyMs: 340.25,
      costUsd: 0.000_012_5,
      startedAt,
    };
    const insert = () =>
      db()
        .insertInto('usageRecords')
        .values(record)
        .onConflict((oc) => oc.column('requestId').doNothing())
        .executeTakeFirst();
    expect((await insert()).numInsertedOrUpdatedRows).toBe(1n);
    expect((await insert()).numInsertedOrUpdatedRows).toBe(0n);
    const rows = await db().selectFrom('usageRecords').selectAll().where('tenantId', '=', tenant.id).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ estimated: false, ttftMs: 12.5, latencyMs: 340.25, costUsd: 0.000_012_5, keyId: null, startedAt });
    expect(rows[0]?.receivedAt).toBeInstanceOf(Date);

    // No foreign key: usage outlives its tenant.
    await db().deleteFrom('tenants').where('id', '=', tenant.id).execute();
    const { tokens } = await db()
      .selectFrom('usageRecords')
      .select((eb) => eb.fn.sum<number>('promptTokens').as('tokens'))
      .where('tenantId', '=', tenant.id)
      .executeTakeFirstOrThrow();
    expect(tokens).toBe(10);
  });

  it("lists one tenant's audit rows newest first from its own index, not a walk over every tenant's", async () => {
    const mine = await seedTenant();
    const others = await seedTenant();
    await sql`insert into audit_log (tenant_id, action, target_type) select ${others.id}, 'x', 'y' from generate_series(1, 5000)`.execute(db());
    await sql`insert into audit_log (tenant_id, action, target_type) values (${mine.id}, 'a', 'b'), (${mine.id}, 'c', 'd')`.execute(db());
    await sql`analyze audit_log`.execute(db());
    // The listing's shape (audit.service.ts): one tenant, newest id first, a page.
    const plan = await sql<{ 'QUERY PLAN': string }>`explain select id from audit_log where tenant_id = ${mine.id} order by id desc limit 50`.execute(db());
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toMatch(/audit_log_tenant_id_idx/);
    expect(text).not.toMatch(/audit_log_pkey/);
    await sql`delete from audit_log where tenant_id in (${mine.id}, ${others.id})`.execute(db());
  });

  it('rejects duplicate slugs and key hashes', async () => {
    const tenant = await seedTenant('dup-slug');
    await expect(seedTenant('dup-slug')).rejects.toMatchObject({ code: '23505' });
    await expect(seedTenant('Not Url Safe')).rejects.toMatchObject({ code: '23514' });
    await db().insertInto('apiKeys').values({ tenantId: tenant.id, name: 'a', prefix: 'p', hash: 'dup-hash' }).execute();
    await expect(db().insertInto('apiKeys').values({ tenantId: tenant.id, name: 'b', prefix: 'p', hash: 'dup-hash' }).execute()).rejects.toMatchObject({
      code: '23505',
    });
  });

  it('cascades a tenant delete to memberships, keys, tokens and deployments', async () => {
    const tenant = await seedTenant();
    const user = await seedUser();
    const entry = await seedEntry();
    await db().insertInto('memberships').values({ tenantId: tenant.id, userId: user.id, role: 'member' }).execute();
    await db()
      .insertInto('apiKeys')
      .values({ tenantId: tenant.id, name: 'k', prefix: 'p', hash: `h-${tenant.id}` })
      .execute();
    await db()
      .insertInto('adminTokens')
      .values({ name: 't', hash: `t-${tenant.id}`, tenantId: tenant.id })
      .execute();
    await db().insertInto('deployments').values({ tenantId: tenant.id, entryId: entry.id, state: 'running' }).execute();

    await db().deleteFrom('tenants').where('id', '=', tenant.id).execute();
    for (const table of ['memberships', 'apiKeys', 'adminTokens', 'deployments'] as const) {
      const rows = await db().selectFrom(table).select('tenantId').where('tenantId', '=', tenant.id).execute();
      expect(rows, table).toEqual([]);
    }
    expect(await db().selectFrom('users').select('id').where('id', '=', user.id).execute()).toHaveLength(1);

    await db()
      .insertInto('sessions')
      .values({ id: `s-${user.id}`, userId: user.id, expiresAt: new Date() })
      .execute();
    await db().deleteFrom('users').where('id', '=', user.id).execute();
    expect(await db().selectFrom('sessions').select('id').where('userId', '=', user.id).execute()).toEqual([]);
  });

  it('rolls back a transaction that throws and commits one that does not', async () => {
    await expect(
      db()
        .transaction()
        .execute(async (trx) => {
          await trx.insertInto('tenants').values({ slug: 'tx-rollback', name: 'x' }).execute();
          await trx.insertInto('configOutbox').values({ kind: 'tenant', entityId: 'tx-rollback', op: 'upsert' }).execute();
          throw new Error('boom');
        }),
    ).rejects.toThrow('boom');
    expect(await db().selectFrom('tenants').select('id').where('slug', '=', 'tx-rollback').execute()).toEqual([]);
    expect(await db().selectFrom('configOutbox').select('seq').where('entityId', '=', 'tx-rollback').execute()).toEqual([]);

    // A failed statement aborts the transaction too.
    await seedTenant('tx-dup');
    await expect(
      db()
        .transaction()
        .execute(async (trx) => {
          await trx.insertInto('configOutbox').values({ kind: 'tenant', entityId: 'tx-dup', op: 'upsert' }).execute();
          await trx.insertInto('tenants').values({ slug: 'tx-dup', name: 'again' }).execute();
        }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await db().selectFrom('configOutbox').select('seq').where('entityId', '=', 'tx-dup').execute()).toEqual([]);

    const id = await db()
      .transaction()
      .execute(async (trx) => {
        const t = await trx.insertInto('tenants').values({ slug: 'tx-commit', name: 'x' }).returning('id').executeTakeFirstOrThrow();
        await trx.insertInto('configOutbox').values({ kind: 'tenant', entityId: t.id, op: 'upsert' }).execute();
        return t.id;
      });
    expect(await db().selectFrom('configOutbox').select('seq').where('entityId', '=', id).execute()).toHaveLength(1);
  });

  it('keeps concurrent transactions isolated from each other', async () => {
    // On PGlite this exercises the connection mutex: interleaved callers must not share a transaction.
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        db()
          .transaction()
          .execute(async (trx) => {
            await trx
              .insertInto('tenants')
              .values({ slug: `conc-${i}`, name: 'c' })
              .execute();
            await new Promise((resolve) => setTimeout(resolve, 5));
            if (i % 2 === 1) throw new Error(`fail ${i}`);
          }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(4);
    const slugs = await db().selectFrom('tenants').select('slug').where('slug', 'like', 'conc-%').orderBy('slug').execute();
    expect(slugs.map((r) => r.slug)).toEqual(['conc-0', 'conc-2', 'conc-4', 'conc-6']);
  });

  it('supports nested transactions through savepoints', async () => {
    const trx = await db().startTransaction().execute();
    await trx.insertInto('tenants').values({ slug: 'sp-outer', name: 'x' }).execute();
    const sp = await trx.savepoint('inner').execute();
    await sp.insertInto('tenants').values({ slug: 'sp-inner', name: 'x' }).execute();
    await sp.rollbackToSavepoint('inner').execute();
    await trx.commit().execute();
    const slugs = await db().selectFrom('tenants').select('slug').where('slug', 'like', 'sp-%').execute();
    expect(slugs.map((r) => r.slug)).toEqual(['sp-outer']);
  });
});

// PGlite test databases start from one migrated template (src/testing.ts): each must still be a database of its own.
describe('test databases on pglite', () => {
  it('are each their own, at the latest migration, however many come from the template', async () => {
    const a = await createTestDb('pglite');
    const b = await createTestDb('pglite');
    try {
      await a.db.insertInto('tenants').values({ slug: 'only-in-a', name: 'A' }).execute();
      expect(await b.db.selectFrom('tenants').select('slug').execute()).toEqual([]);
      expect((await a.db.selectFrom('tenants').select('slug').execute()).map((t) => t.slug)).toEqual(['only-in-a']);
      // Nothing left to apply, and down again applies every migration in reverse: the template is fully migrated.
      expect(await migrateToLatest(b.db)).toEqual([]);
      expect(await migrateDown(b.db, { all: true })).toEqual([...migrationNames].reverse());
    } finally {
      await a.close();
      await b.close();
    }
  });
});
