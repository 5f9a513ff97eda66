import { sql } from 'kysely';
import { generateSecret, hashSecret, hasValidChecksum, SECRET_PREFIX, secretDisplayPrefix } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { notFound, ServiceError } from '../../errors.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { checkCredentialInput } from '../access/credential-input.ts';

/** An admin token as listed; never its secret or hash. */
export interface AdminToken {
  id: string;
  name: string;
  prefix: string | null;
  userId: string | null;
  /** null: platform-wide. */
  tenantId: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

const tokenColumns = ['id', 'name', 'prefix', 'userId', 'tenantId', 'createdAt', 'expiresAt', 'revokedAt', 'lastUsedAt'] as const;

export interface CreateAdminTokenInput {
  readonly name: string;
  /** The user the token acts for (audit); null for tokens made by automation. */
  readonly userId?: string | null;
  /** null: platform-wide (only platform admins may create one: check with `requireAdminTokenScope`). */
  readonly tenantId: string | null;
  readonly expiresAt?: Date | null;
  readonly actor?: Actor;
}

export interface CreatedAdminToken {
  token: AdminToken;
  /** The whole secret (`infa_…`): returned this once, stored only as its SHA-256. */
  secret: string;
}

/** Issues an admin token for GraphQL / tRPC automation. The caller has checked the scope. */
export async function createAdminToken(db: Db, input: CreateAdminTokenInput): Promise<CreatedAdminToken> {
  const name = checkCredentialInput(input.name, input.expiresAt);
  if (input.tenantId !== null && !isUuid(input.tenantId)) throw notFound('tenant');
  const secret = generateSecret(SECRET_PREFIX.admin);
  return withTransaction(db, async (trx) => {
    if (input.tenantId !== null) {
      const tenant = await trx.selectFrom('tenants').select('id').where('id', '=', input.tenantId).executeTakeFirst();
      if (!tenant) throw notFound('tenant');
    }
    const token = await trx
      .insertInto('adminTokens')
      .values({
        name,
        prefix: secretDisplayPrefix(secret),
        hash: hashSecret(secret),
        userId: input.userId ?? null,
        tenantId: input.tenantId,
        expiresAt: input.expiresAt ?? null,
      })
      .returning(tokenColumns)
      .executeTakeFirstOrThrow();
    await writeAudit(trx, {
      actor: input.actor ?? { userId: input.userId ?? null },
      tenantId: input.tenantId,
      action: 'admin_token.create',
      targetType: 'admin_token',
      targetId: token.id,
      detail: { name, prefix: token.prefix, scope: input.tenantId === null ? 'platform' : 'tenant' },
    });
    return { token, secret };
  });
}

/**
 * Admin tokens, newest first. `tenantId` string: that tenant's tokens only; `undefined`: all
 * (platform admins).
 */
export async function listAdminTokens(db: Db, scope: { tenantId?: string }): Promise<AdminToken[]> {
  let q = db.selectFrom('adminTokens').select(tokenColumns).orderBy('createdAt', 'desc').orderBy('id');
  if (scope.tenantId !== undefined) {
    if (!isUuid(scope.tenantId)) return [];
    q = q.where('tenantId', '=', scope.tenantId);
  }
  return q.execute();
}

/**
 * Revokes a token. With `tenantId`, only a token of that tenant can be named (others are "not
 * found"); without, any token (platform admins).
 */
export async function revokeAdminToken(db: Db, input: { tokenId: string; tenantId?: string; actor?: Actor }): Promise<AdminToken> {
  if (!isUuid(input.tokenId) || (input.tenantId !== undefined && !isUuid(input.tenantId))) throw notFound('admin token');
  return withTransaction(db, async (trx) => {
    let q = trx
      .updateTable('adminTokens')
      .set({ revokedAt: sql<Date>`coalesce(revoked_at, now())` })
      .where('id', '=', input.tokenId);
    if (input.tenantId !== undefined) q = q.where('tenantId', '=', input.tenantId);
    const token = await q.returning(tokenColumns).executeTakeFirst();
    if (!token) throw notFound('admin token');
    await writeAudit(trx, {
      actor: input.actor,
      tenantId: token.tenantId,
      action: 'admin_token.revoke',
      targetType: 'admin_token',
      targetId: token.id,
      detail: { prefix: token.prefix },
    });
    return token;
  });
}

/** What a valid admin token authenticates as. */
export interface AdminTokenIdentity {
  tokenId: string;
  userId: string | null;
  tenantId: string | null;
}

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * The identity of an `infa_…` secret, or a `unauthenticated` error (unknown, revoked, expired).
 * Bumps `last_used_at` at most once a minute.
 */
export async function authenticateAdminToken(db: Db, secret: string): Promise<AdminTokenIdentity> {
  const refused = new ServiceError('unauthenticated', 'admin token is invalid, revoked or expired');
  if (!secret.startsWith(SECRET_PREFIX.admin) || !hasValidChecksum(secret)) throw refused;
  const row = await db
    .selectFrom('adminTokens')
    .select(['id', 'userId', 'tenantId', 'expiresAt', 'revokedAt', 'lastUsedAt'])
    .where('hash', '=', hashSecret(secret))
    .executeTakeFirst();
  const now = Date.now();
  if (!row || row.revokedAt !== null || (row.expiresAt !== null && row.expiresAt.getTime() <= now)) throw refused;
  if (row.lastUsedAt === null || now - row.lastUsedAt.getTime() >= LAST_USED_RESOLUTION_MS) {
    await db
      .updateTable('adminTokens')
      .set({ lastUsedAt: sql<Date>`now()` })
      .where('id', '=', row.id)
      .where((eb) => eb.or([eb('lastUsedAt', 'is', null), eb('lastUsedAt', '<', sql<Date>`now() - interval '1 minute'`)]))
      .execute();
  }
  return { tokenId: row.id, userId: row.userId, tenantId: row.tenantId };
}
