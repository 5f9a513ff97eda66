import { sql } from 'kysely';
import { generateSecret, hashSecret, hasValidChecksum, SECRET_PREFIX, secretDisplayPrefix } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { notFound, ServiceError } from '../../errors.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { checkCredentialInput, liveCredential } from '../access/credential-input.ts';
import { requireAuthenticated, requirePlatformAdmin, requireTenantRole } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { storedRights, storedRightsReach } from '../access/stored-rights.ts';
import { checkTenantQuota } from '../tenants/tenant-quota.ts';

/** An admin token as listed; never its secret or hash. */
export interface AdminToken {
  id: string;
  name: string;
  prefix: string | null;
  userId: string | null;
  /** null: platform-wide. */
  tenantId: string | null;
  /** The admin token that minted this one (null: minted by a signed-in user or a script); revoking it revokes this. */
  parentTokenId: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

const tokenColumns = ['id', 'name', 'prefix', 'userId', 'tenantId', 'parentTokenId', 'createdAt', 'expiresAt', 'revokedAt', 'lastUsedAt'] as const;

export interface CreateAdminTokenInput {
  readonly name: string;
  /** null: platform-wide (platform admins only); a tenant id: acts as owner of that tenant (its owners). */
  readonly tenantId: string | null;
  readonly expiresAt?: Date | null;
}

/** A token minted outside any caller's request (start-up scripts, seeds, tests): no authorisation. */
export interface IssueAdminTokenInput extends CreateAdminTokenInput {
  /** The user the token acts for (audit, and the rights it may never exceed); null for automation. */
  readonly userId?: string | null;
  /** The admin token minting this one: the new token ends when it is revoked, and never outlives it. */
  readonly parentTokenId?: string | null;
  readonly actor?: Actor;
}

export interface CreatedAdminToken {
  token: AdminToken;
  /** The whole secret (`infa_…`): returned this once, stored only as its SHA-256. */
  secret: string;
}

/**
 * Who may hold admin tokens of a scope: a platform-wide one (tenantId null) needs a platform admin; a
 * tenant's, its owner (platform admins and that tenant's own admin token act as owners). Another tenant
 * is "not found". The one home of the rule: every admin-token function below checks it.
 */
function requireTokenScope(principal: Principal, tenantId: string | null): void {
  if (tenantId === null) requirePlatformAdmin(principal);
  else requireTenantRole(principal, tenantId, 'owner');
}

/**
 * Creates an admin token for the caller, within their rights (see `requireTokenScope`); it acts for the
 * caller's user. A token minted by a token inherits that token's user, is revoked with it, and expires no
 * later than it. The secret is in this reply only.
 */
export async function createAdminToken(db: Db, principal: Principal, input: CreateAdminTokenInput): Promise<CreatedAdminToken> {
  requireTokenScope(principal, input.tenantId);
  requireAuthenticated(principal);
  const parentTokenId = principal.kind === 'admin_token' ? principal.tokenId : null;
  return issueAdminToken(db, { ...input, userId: principal.userId, parentTokenId, actor: actorOf(principal) });
}

/**
 * Live (unrevoked, unexpired) tenant admin tokens a tenant may hold: a token mints more, so without a bound one
 * token grew into thousands within seconds.
 */
export const MAX_LIVE_ADMIN_TOKENS_PER_TENANT = 100;

/** Mints an admin token without a caller (start-up scripts, seeds, tests): no authorisation here. */
export async function issueAdminToken(db: Db, input: IssueAdminTokenInput): Promise<CreatedAdminToken> {
  const name = checkCredentialInput(input.name, input.expiresAt);
  if (input.tenantId !== null && !isUuid(input.tenantId)) throw notFound('tenant');
  const secret = generateSecret(SECRET_PREFIX.admin);
  return withTransaction(db, async (trx) => {
    // The tenant's row before the parent token's (the order a removal or demotion takes them in).
    const tenantId = input.tenantId;
    if (tenantId !== null) {
      await checkTenantQuota(
        trx,
        tenantId,
        {
          max: MAX_LIVE_ADMIN_TOKENS_PER_TENANT,
          what: 'live admin tokens',
          free: 'revoke tokens no longer used first',
          count: async () => {
            const live = await trx
              .selectFrom('adminTokens')
              .select((eb) => eb.fn.countAll<string>().as('n'))
              .where('tenantId', '=', tenantId)
              .where(liveCredential)
              .executeTakeFirstOrThrow();
            return Number(live.n);
          },
        },
        { userId: input.userId, role: 'owner' },
      );
    }
    const expiresAt = await expiryUnderParent(trx, input.parentTokenId ?? null, input.expiresAt ?? null);
    const token = await trx
      .insertInto('adminTokens')
      .values({
        name,
        prefix: secretDisplayPrefix(secret),
        hash: hashSecret(secret),
        userId: input.userId ?? null,
        tenantId: input.tenantId,
        parentTokenId: input.parentTokenId ?? null,
        expiresAt,
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
 * The expiry of a token minted by `parentTokenId`: the one asked for, or the parent's when none was asked; one later
 * than the parent's is refused. Locks the parent's row (FOR SHARE) so a revocation running at the same
 * moment waits for this mint and then revokes the child too, or commits first and the mint is refused.
 */
async function expiryUnderParent(trx: Db, parentTokenId: string | null, asked: Date | null): Promise<Date | null> {
  if (parentTokenId === null) return asked;
  const parent = await trx.selectFrom('adminTokens').select(['revokedAt', 'expiresAt']).where('id', '=', parentTokenId).forShare().executeTakeFirst();
  if (!parent || parent.revokedAt !== null || (parent.expiresAt !== null && parent.expiresAt.getTime() <= Date.now())) {
    throw new ServiceError('unauthenticated', 'admin token is invalid, revoked or expired');
  }
  if (parent.expiresAt === null) return asked;
  if (asked === null) return parent.expiresAt;
  if (asked.getTime() > parent.expiresAt.getTime()) {
    throw new ServiceError(
      'invalid',
      `expiresAt may not be later than the expiry of the admin token minting it (${parent.expiresAt.toISOString()})`,
      'expiresAt',
    );
  }
  return asked;
}

/**
 * Admin tokens, newest first. `tenantId` given: that tenant's tokens (its owners); absent: every token
 * (platform admins).
 */
export async function listAdminTokens(db: Db, principal: Principal, scope: { readonly tenantId?: string } = {}): Promise<AdminToken[]> {
  requireTokenScope(principal, scope.tenantId ?? null);
  let q = db.selectFrom('adminTokens').select(tokenColumns).orderBy('createdAt', 'desc').orderBy('id');
  if (scope.tenantId !== undefined) {
    if (!isUuid(scope.tenantId)) return [];
    q = q.where('tenantId', '=', scope.tenantId);
  }
  return q.execute();
}

/**
 * Revokes a token and every token minted through it (its children, theirs, and so on), in one transaction.
 * With `tenantId` (its owners), only a token of that tenant can be named (others are "not found"); without,
 * any token (platform admins).
 */
export async function revokeAdminToken(db: Db, principal: Principal, input: { readonly tokenId: string; readonly tenantId?: string }): Promise<AdminToken> {
  requireTokenScope(principal, input.tenantId ?? null);
  const actor = actorOf(principal);
  if (!isUuid(input.tokenId) || (input.tenantId !== undefined && !isUuid(input.tenantId))) throw notFound('admin token');
  return withTransaction(db, async (trx) => {
    let q = trx
      .updateTable('adminTokens')
      .set({ revokedAt: sql<Date>`coalesce(revoked_at, now())` })
      .where('id', '=', input.tokenId);
    if (input.tenantId !== undefined) q = q.where('tenantId', '=', input.tenantId);
    const token = await q.returning(tokenColumns).executeTakeFirst();
    if (!token) throw notFound('admin token');
    const descendants = await revokeDescendants(trx, token.id);
    await writeAudit(trx, {
      actor,
      tenantId: token.tenantId,
      action: 'admin_token.revoke',
      targetType: 'admin_token',
      targetId: token.id,
      detail: { prefix: token.prefix, ...(descendants.length > 0 ? { revokedDescendants: descendants } : {}) },
    });
    return token;
  });
}

/**
 * Revokes every live token minted, directly or through others, by `tokenId`; returns their ids. Repeated until a pass
 * finds none: a statement's tree is read before it waits on a row a mint holds (FOR SHARE, `expiryUnderParent`), so
 * a grandchild that mint committed meanwhile is only seen by the next statement.
 */
async function revokeDescendants(trx: Db, tokenId: string): Promise<string[]> {
  const revoked: string[] = [];
  for (;;) {
    const { rows } = await sql<{ id: string }>`
      with recursive descendants(id) as (
        select id from admin_tokens where parent_token_id = ${tokenId}
        union
        select t.id from admin_tokens t join descendants d on t.parent_token_id = d.id
      )
      update admin_tokens set revoked_at = now()
      where id in (select id from descendants) and revoked_at is null
      returning id`.execute(trx);
    if (rows.length === 0) return revoked;
    for (const r of rows) revoked.push(r.id);
  }
}

/** What a valid admin token authenticates as. */
export interface AdminTokenIdentity {
  tokenId: string;
  userId: string | null;
  tenantId: string | null;
}

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * The identity of an `infa_…` secret, or a `unauthenticated` error (unknown, revoked, expired, or
 * beyond its creator's current rights). Bumps `last_used_at` at most once a minute.
 *
 * A token never carries more than the user who minted it has NOW: a tenant token acts as owner, so
 * its creator must still own that tenant (or be a platform admin); a platform token's creator must
 * still be a platform admin. Checked on every use, so a demotion takes effect at once even where
 * `revokeAdminTokensBeyondRole` was not called.
 */
export async function authenticateAdminToken(db: Db, secret: string): Promise<AdminTokenIdentity> {
  const refused = new ServiceError('unauthenticated', 'admin token is invalid, revoked or expired');
  if (!secret.startsWith(SECRET_PREFIX.admin) || !hasValidChecksum(secret)) throw refused;
  const row = await db
    .selectFrom('adminTokens as t')
    .leftJoin('users as u', 'u.id', 't.userId')
    .leftJoin('memberships as m', (j) => j.onRef('m.userId', '=', 't.userId').onRef('m.tenantId', '=', 't.tenantId'))
    .select([
      't.id',
      't.userId',
      't.tenantId',
      't.expiresAt',
      't.revokedAt',
      't.lastUsedAt',
      'u.isPlatformAdmin as creatorIsPlatformAdmin',
      'm.role as creatorRole',
    ])
    .where('t.hash', '=', hashSecret(secret))
    .executeTakeFirst();
  const now = Date.now();
  if (!row || row.revokedAt !== null || (row.expiresAt !== null && row.expiresAt.getTime() <= now)) throw refused;
  if (row.userId !== null) {
    const creatorIsAdmin = row.creatorIsPlatformAdmin === true;
    const withinRights = row.tenantId === null ? creatorIsAdmin : creatorIsAdmin || row.creatorRole === 'owner';
    if (!withinRights) {
      throw new ServiceError('unauthenticated', "admin token exceeds its creator's current role (the creator was demoted or removed); mint a new one");
    }
  }
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

/**
 * Revokes the tenant admin tokens `userId` minted for `tenantId` when the user's current rights
 * there are below what such a token carries (owner): the membership change paths (demotion,
 * removal) call it inside their transaction. Returns the ids revoked (for the audit row).
 */
export async function revokeAdminTokensBeyondRole(trx: Db, input: { tenantId: string; userId: string }): Promise<string[]> {
  if (storedRightsReach(await storedRights(trx, input), 'owner')) return [];
  const rows = await trx
    .updateTable('adminTokens')
    .set({ revokedAt: sql<Date>`now()` })
    .where('tenantId', '=', input.tenantId)
    .where('userId', '=', input.userId)
    .where('revokedAt', 'is', null)
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}
