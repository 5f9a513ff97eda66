import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { hashSecret, SECRET_PREFIX } from '@infer/shared';
import { ServiceError } from '../src/errors.ts';
import { createApiKey, listApiKeys, MAX_LIVE_KEYS_PER_TENANT, revokeApiKey } from '../src/modules/keys/keys.service.ts';
import { buildSnapshot } from '../src/modules/snapshots/snapshots.service.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';

describe.each(testBackends())('keys service (%s)', (kind) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDb(kind);
  });
  afterAll(async () => database?.close());

  it('shows the secret once and stores only its hash', async () => {
    const { db } = database;
    const tenant = await createTenant(db, { slug: 'one', name: 'One' });
    const created = await createApiKey(db, { tenantId: tenant.id, name: 'ci' });
    expect(created.secret.startsWith(SECRET_PREFIX.inference)).toBe(true);
    expect(created.key.prefix).toBe(created.secret.slice(0, 12));
    expect(JSON.stringify(created.key)).not.toContain(created.secret);

    const listed = await listApiKeys(db, tenant.id);
    expect(listed).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(created.secret);
    expect(Object.keys(listed[0]!)).not.toContain('hash');

    const stored = await db.selectFrom('apiKeys').select(['hash', 'prefix']).where('id', '=', created.key.id).executeTakeFirstOrThrow();
    expect(stored.hash).toBe(hashSecret(created.secret));
    const everything = JSON.stringify(await db.selectFrom('apiKeys').selectAll().execute());
    expect(everything).not.toContain(created.secret);

    const audit = await db.selectFrom('auditLog').select(['action', 'detail']).where('targetId', '=', created.key.id).execute();
    expect(audit.map((a) => a.action)).toEqual(['api_key.create']);
    expect(JSON.stringify(audit)).not.toContain(created.secret);
  });

  it('refuses an expiry past the year 9999 (UTC), which the API could not give back as a DateTime it takes', async () => {
    const { db } = database;
    const tenant = await createTenant(db, { slug: 'far', name: 'Far' });
    // What tRPC's `z.iso.datetime({ offset: true })` takes for "9999-12-31T23:59:59-14:00".
    const far = new Date('9999-12-31T23:59:59-14:00');
    await expect(createApiKey(db, { tenantId: tenant.id, name: 'far', expiresAt: far })).rejects.toMatchObject({
      code: 'invalid',
      param: 'expiresAt',
      message: 'expiresAt must be a date of the years 0001 to 9999 (UTC)',
    });
    expect(await listApiKeys(db, tenant.id)).toEqual([]);
    const last = await createApiKey(db, { tenantId: tenant.id, name: 'last', expiresAt: new Date('9999-12-31T23:59:59Z') });
    expect(last.key.expiresAt?.toISOString()).toBe('9999-12-31T23:59:59.000Z');
  });

  it('holds a tenant to MAX_LIVE_KEYS_PER_TENANT live keys; revoked and expired ones do not count', async () => {
    const { db } = database;
    const tenant = await createTenant(db, { slug: `capped-${kind}`, name: 'Capped' });
    // All but one place taken directly (creating a thousand through the service is slow, not different).
    await sql`insert into api_keys (tenant_id, name, prefix, hash)
      select ${tenant.id}, 'bulk', 'infk_bulk', 'h-' || ${tenant.id}::text || '-' || g from generate_series(1, ${MAX_LIVE_KEYS_PER_TENANT - 1}) g`.execute(db);
    await sql`insert into api_keys (tenant_id, name, prefix, hash, revoked_at) values (${tenant.id}, 'gone', 'infk_gone', ${`gone-${tenant.id}`}, now())`.execute(
      db,
    );
    await sql`insert into api_keys (tenant_id, name, prefix, hash, expires_at) values (${tenant.id}, 'old', 'infk_old', ${`old-${tenant.id}`}, now() - interval '1 day')`.execute(
      db,
    );
    const last = await createApiKey(db, { tenantId: tenant.id, name: 'the last place' });
    const refused = await createApiKey(db, { tenantId: tenant.id, name: 'one too many' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect(refused).toMatchObject({
      code: 'conflict',
      message: `a tenant holds at most ${MAX_LIVE_KEYS_PER_TENANT} live API keys: revoke keys no longer used first`,
    });
    // Revoking one frees its place.
    await revokeApiKey(db, { tenantId: tenant.id, keyId: last.key.id });
    await expect(createApiKey(db, { tenantId: tenant.id, name: 'in its place' })).resolves.toMatchObject({ key: { name: 'in its place' } });
    await sql`delete from api_keys where tenant_id = ${tenant.id}`.execute(db);
  });

  it("treats another tenant's key as not found", async () => {
    const { db } = database;
    const a = await createTenant(db, { slug: 'tenant-a', name: 'A' });
    const b = await createTenant(db, { slug: 'tenant-b', name: 'B' });
    const keyOfA = await createApiKey(db, { tenantId: a.id, name: 'a key' });
    const err = await revokeApiKey(db, { tenantId: b.id, keyId: keyOfA.key.id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('not_found');
    expect((await revokeApiKey(db, { tenantId: a.id, keyId: 'not-a-uuid' }).catch((e: unknown) => e)) as ServiceError).toMatchObject({ code: 'not_found' });
    expect((await listApiKeys(db, a.id))[0]!.revokedAt).toBeNull();

    const revoked = await revokeApiKey(db, { tenantId: a.id, keyId: keyOfA.key.id });
    expect(revoked.revokedAt).toBeInstanceOf(Date);
    const snap = await buildSnapshot(db);
    expect(snap.keys.some((k) => k.id === keyOfA.key.id)).toBe(false);
  });

  it('writes a key delete for an expired key and keeps expiresAt for live ones', async () => {
    const { db } = database;
    const t = await createTenant(db, { slug: 'exp', name: 'Exp' });
    const expiresAt = new Date(Date.now() + 3_600_000);
    const k = await createApiKey(db, { tenantId: t.id, name: 'short', expiresAt });
    const snapKey = (await buildSnapshot(db)).keys.find((x) => x.id === k.key.id);
    expect(snapKey?.expiresAt).toBe(expiresAt.toISOString());
    await expect(createApiKey(db, { tenantId: t.id, name: 'past', expiresAt: new Date(Date.now() - 1000) })).rejects.toMatchObject({ code: 'invalid' });
  });
});
