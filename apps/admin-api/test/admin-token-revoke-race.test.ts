// A revocation racing a mint two levels down, on PostgreSQL (PGlite runs one transaction at a time, so the race needs
// a server): P minted C; a mint from C holds C's row FOR SHARE while P is revoked. The revocation's statement read the
// tree before it waited on C, so the grandchild the mint then committed was left live under a revoked grandparent.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { hashSecret } from '@infer/shared';
import { issueAdminToken, revokeAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import type { Principal } from '../src/modules/access/principal.ts';

// Runs where the suite has a server (CI sets DATABASE_URL, as .ci/run does for every database suite).
const onServer = testBackends().includes('postgres');

describe('admin token revocation racing a mint (PostgreSQL)', () => {
  let database: TestDatabase;
  let admin: Principal;

  beforeAll(async () => {
    if (!onServer) return;
    database = await createTestDb('postgres');
    const user = await createUser(database.db, { email: 'race-admin@example.com', password: 'correct-horse-battery-7', isPlatformAdmin: true });
    admin = { kind: 'user', userId: user.id, email: user.email, isPlatformAdmin: true, memberships: new Map(), sessionId: 's' };
  }, 60_000);
  afterAll(async () => database?.close());

  /** Sessions of this database waiting on a lock (the revocation, once it reached the mint's row). */
  const waitingOnLocks = async (): Promise<number> =>
    (
      await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(
        database.db,
      )
    ).rows[0]!.n;

  it.runIf(onServer)('revoking a grandparent revokes the grandchild a mint committed while the revocation waited', async () => {
    const { db } = database;
    const userId = admin.kind === 'user' ? admin.userId : null;
    const p = await issueAdminToken(db, { name: 'grandparent', tenantId: null, userId });
    const c = await issueAdminToken(db, { name: 'parent', tenantId: null, userId, parentTokenId: p.token.id });
    let revoking: Promise<unknown> | undefined;
    let grandchild = '';
    // The mint of a grandchild from C, stopped where it holds C (as expiryUnderParent does) until P's revocation waits.
    await db.transaction().execute(async (trx) => {
      await trx.selectFrom('adminTokens').select('id').where('id', '=', c.token.id).forShare().execute();
      revoking = revokeAdminToken(db, admin, { tokenId: p.token.id });
      for (let i = 0; (await waitingOnLocks()) === 0; i++) {
        if (i > 500) throw new Error('the revocation never waited on the mint');
        await new Promise((r) => setTimeout(r, 10));
      }
      const row = await trx
        .insertInto('adminTokens')
        .values({ name: 'grandchild', prefix: null, hash: hashSecret(`grandchild-${Date.now()}`), userId, tenantId: null, parentTokenId: c.token.id })
        .returning('id')
        .executeTakeFirstOrThrow();
      grandchild = row.id;
    });
    await revoking;
    const rows = await db.selectFrom('adminTokens').select(['id', 'revokedAt']).where('id', 'in', [p.token.id, c.token.id, grandchild]).execute();
    expect(rows.filter((r) => r.revokedAt === null).map((r) => r.id)).toEqual([]);
  });
});
