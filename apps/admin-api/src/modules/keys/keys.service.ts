import { sql } from 'kysely';
import { generateSecret, hashSecret, SECRET_PREFIX, secretDisplayPrefix } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { notFound, ServiceError } from '../../errors.ts';
import { writeAudit, type Actor } from '../audit/audit.service.ts';
import { checkTenantQuota } from '../tenants/tenant-quota.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { recordChange } from '../snapshots/snapshots.service.ts';
import { checkCredentialInput, liveCredential } from '../access/credential-input.ts';
import { keyRevokeLimit, requireTenantRole } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { storedRights, storedRightsReach } from '../access/stored-rights.ts';
import { checkRateLimits } from '../access/rate-limits.ts';

/** An inference API key as shown in lists; never its secret or hash. */
export interface ApiKey {
  id: string;
  tenantId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  rpmLimit: number | null;
  tpmLimit: number | null;
  /** The user who created it, if any. */
  createdBy: string | null;
}

const keyColumns = ['id', 'tenantId', 'name', 'prefix', 'createdAt', 'expiresAt', 'revokedAt', 'lastUsedAt', 'rpmLimit', 'tpmLimit', 'createdBy'] as const;

export interface CreateApiKeyInput {
  readonly tenantId: string;
  readonly name: string;
  readonly expiresAt?: Date | null;
  readonly createdBy?: string | null;
  readonly rpmLimit?: number | null;
  readonly tpmLimit?: number | null;
  readonly actor?: Actor;
}

export interface CreatedApiKey {
  key: { id: string; name: string; prefix: string; createdAt: Date; expiresAt: Date | null; rpmLimit: number | null; tpmLimit: number | null };
  /** The whole secret: returned this once, stored only as its SHA-256. */
  secret: string;
}

/**
 * Live (unrevoked, unexpired) keys a tenant may hold: every key is in every data-plane node's snapshot and pushed to
 * each through the outbox, so a member minting keys without end (tens of thousands an hour) grew every node's config.
 */
export const MAX_LIVE_KEYS_PER_TENANT = 1000;

/** Issues an inference key for a tenant (serves shared and dedicated modes). */
export async function createApiKey(db: Db, input: CreateApiKeyInput): Promise<CreatedApiKey> {
  const name = checkCredentialInput(input.name, input.expiresAt);
  checkRateLimits(input);
  if (!isUuid(input.tenantId)) throw notFound('tenant');
  const secret = generateSecret(SECRET_PREFIX.inference);
  return withTransaction(db, async (trx) => {
    await checkTenantQuota(
      trx,
      input.tenantId,
      {
        max: MAX_LIVE_KEYS_PER_TENANT,
        what: 'live API keys',
        free: 'revoke keys no longer used first',
        count: async () => {
          const live = await trx
            .selectFrom('apiKeys')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('tenantId', '=', input.tenantId)
            .where(liveCredential)
            .executeTakeFirstOrThrow();
          return Number(live.n);
        },
      },
      { userId: input.createdBy, role: 'member' },
    );
    const row = await trx
      .insertInto('apiKeys')
      .values({
        tenantId: input.tenantId,
        name,
        prefix: secretDisplayPrefix(secret),
        hash: hashSecret(secret),
        createdBy: input.createdBy ?? null,
        expiresAt: input.expiresAt ?? null,
        rpmLimit: input.rpmLimit ?? null,
        tpmLimit: input.tpmLimit ?? null,
      })
      .returning(['id', 'name', 'prefix', 'createdAt', 'expiresAt', 'rpmLimit', 'tpmLimit'])
      .executeTakeFirstOrThrow();
    await recordChange(trx, 'key', row.id);
    await writeAudit(trx, {
      actor: input.actor ?? { userId: input.createdBy ?? null },
      tenantId: input.tenantId,
      action: 'api_key.create',
      targetType: 'api_key',
      targetId: row.id,
      detail: { name, prefix: row.prefix, rpmLimit: row.rpmLimit, tpmLimit: row.tpmLimit },
    });
    return { key: row, secret };
  });
}

export interface RevokeApiKeyInput {
  readonly tenantId: string;
  readonly keyId: string;
  /** Only a key this user created may be revoked (members); others are refused as forbidden. */
  readonly onlyCreatedBy?: string;
  readonly actor?: Actor;
}

/** Revokes a tenant's key; a key of another tenant is "not found". Nodes drop it within a second. */
export async function revokeApiKey(db: Db, input: RevokeApiKeyInput): Promise<ApiKey> {
  if (!isUuid(input.keyId) || !isUuid(input.tenantId)) throw notFound('API key');
  return withTransaction(db, async (trx) => {
    if (input.onlyCreatedBy !== undefined) {
      const key = await trx.selectFrom('apiKeys').select('createdBy').where('id', '=', input.keyId).where('tenantId', '=', input.tenantId).executeTakeFirst();
      if (!key) throw notFound('API key');
      if (key.createdBy !== input.onlyCreatedBy) throw new ServiceError('forbidden', 'members may revoke only the keys they created');
    }
    const row = await trx
      .updateTable('apiKeys')
      .set({ revokedAt: sql<Date>`coalesce(revoked_at, now())` })
      .where('id', '=', input.keyId)
      .where('tenantId', '=', input.tenantId)
      .returning(keyColumns)
      .executeTakeFirst();
    if (!row) throw notFound('API key');
    await recordChange(trx, 'key', row.id);
    await writeAudit(trx, {
      actor: input.actor,
      tenantId: input.tenantId,
      action: 'api_key.revoke',
      targetType: 'api_key',
      targetId: row.id,
      detail: { prefix: row.prefix },
    });
    return row;
  });
}

/**
 * Revokes the live keys `userId` created in `tenantId` when they no longer belong to it (removed, and not a platform
 * admin): the membership removal path calls it inside its transaction, so access ends with the membership, keys
 * included. Nodes drop them within a second. Returns the ids revoked (for the audit row).
 */
export async function revokeApiKeysOfDeparted(trx: Db, input: { readonly tenantId: string; readonly userId: string }): Promise<string[]> {
  if (storedRightsReach(await storedRights(trx, input), 'member')) return [];
  const rows = await trx
    .updateTable('apiKeys')
    .set({ revokedAt: sql<Date>`now()` })
    .where('tenantId', '=', input.tenantId)
    .where('createdBy', '=', input.userId)
    .where('revokedAt', 'is', null)
    .returning('id')
    .execute();
  for (const r of rows) await recordChange(trx, 'key', r.id);
  return rows.map((r) => r.id);
}

/** A tenant's keys, newest first (revoked ones included, flagged by `revokedAt`). */
export async function listApiKeys(db: Db, tenantId: string): Promise<ApiKey[]> {
  return db.selectFrom('apiKeys').select(keyColumns).where('tenantId', '=', tenantId).orderBy('createdAt', 'desc').orderBy('id').execute();
}

// What the transports call: the caller's rights are checked here, not in the adapters.

/** Members issue keys for their tenant; the key records which user created it. */
export async function issueApiKey(db: Db, principal: Principal, input: Omit<CreateApiKeyInput, 'createdBy' | 'actor'>): Promise<CreatedApiKey> {
  requireTenantRole(principal, input.tenantId, 'member');
  return createApiKey(db, {
    ...input,
    createdBy: principal.kind === 'anonymous' ? null : principal.userId,
    actor: actorOf(principal),
  });
}

/** Members revoke the keys they created; owners (and tenant or platform tokens) any key of the tenant. */
export function revokeTenantApiKey(db: Db, principal: Principal, ref: { readonly tenantId: string; readonly keyId: string }): Promise<ApiKey> {
  const onlyCreatedBy = keyRevokeLimit(principal, ref.tenantId);
  return revokeApiKey(db, { ...ref, onlyCreatedBy, actor: actorOf(principal) });
}

/** A tenant's keys for one of its members. */
export async function listTenantApiKeys(db: Db, principal: Principal, tenantId: string): Promise<ApiKey[]> {
  requireTenantRole(principal, tenantId, 'member');
  return listApiKeys(db, tenantId);
}
