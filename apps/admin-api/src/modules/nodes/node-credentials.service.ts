// Data-plane node credentials: one secret per node, so one node can be cut off without touching the
// others. Every rule (platform admins only, audit, secret shown once) lives here; tRPC and GraphQL call in.
import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import { generateSecret, hashSecret, hasValidChecksum, SECRET_PREFIX, secretDisplayPrefix } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { checkName } from '../../check-name.ts';
import { notFound } from '../../errors.ts';
import { requirePlatformAdmin } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { writeAudit } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';

/** A node credential as listed; never its secret or hash. */
export interface NodeCredential {
  id: string;
  name: string;
  prefix: string;
  createdBy: string | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface CreatedNodeCredential {
  credential: NodeCredential;
  /** The whole secret (`infn_…`): returned this once, stored only as its SHA-256. Set it as the node's NODE_TOKEN. */
  secret: string;
}

const columns = ['id', 'name', 'prefix', 'createdBy', 'createdAt', 'lastUsedAt', 'revokedAt'] as const;

/**
 * Fires `revoked` with the credential id after a revoke commits, so this process closes the node's
 * open config streams at once (streams on other replicas notice at their next re-check).
 */
export const nodeCredentialEvents = new EventEmitter();
nodeCredentialEvents.setMaxListeners(0);

/** Platform admins: issues a credential for one data-plane node; the secret is in this answer only. */
export async function createNodeCredential(db: Db, principal: Principal, input: { name: string }): Promise<CreatedNodeCredential> {
  requirePlatformAdmin(principal);
  const name = checkName(input.name, 'name', { max: 100 });
  const secret = generateSecret(SECRET_PREFIX.node);
  return withTransaction(db, async (trx) => {
    const credential = await trx
      .insertInto('nodeCredentials')
      .values({
        name,
        prefix: secretDisplayPrefix(secret),
        hash: hashSecret(secret),
        createdBy: principal.kind === 'user' ? principal.userId : principal.kind === 'admin_token' ? principal.userId : null,
      })
      .returning(columns)
      .executeTakeFirstOrThrow();
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: null,
      action: 'node_credential.create',
      targetType: 'node_credential',
      targetId: credential.id,
      detail: { name, prefix: credential.prefix },
    });
    return { credential, secret };
  });
}

/** Platform admins: every node credential, newest first (revoked ones flagged by revokedAt). */
export async function listNodeCredentials(db: Db, principal: Principal): Promise<NodeCredential[]> {
  requirePlatformAdmin(principal);
  return db.selectFrom('nodeCredentials').select(columns).orderBy('createdAt', 'desc').orderBy('id').execute();
}

/** Platform admins: revokes a credential; the node's requests are refused and its config stream closed. */
export async function revokeNodeCredential(db: Db, principal: Principal, input: { id: string }): Promise<NodeCredential> {
  requirePlatformAdmin(principal);
  if (!isUuid(input.id)) throw notFound('node credential');
  const credential = await withTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('nodeCredentials')
      .set({ revokedAt: sql<Date>`coalesce(revoked_at, now())` })
      .where('id', '=', input.id)
      .returning(columns)
      .executeTakeFirst();
    if (!row) throw notFound('node credential');
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: null,
      action: 'node_credential.revoke',
      targetType: 'node_credential',
      targetId: row.id,
      detail: { prefix: row.prefix },
    });
    return row;
  });
  nodeCredentialEvents.emit('revoked', credential.id);
  return credential;
}

/** Who a node request authenticated as: a node credential, or the bootstrap NODE_TOKEN (id null). */
export interface NodeIdentity {
  readonly credentialId: string | null;
}

const LAST_USED_RESOLUTION_MS = 60_000;

/** The credential of an `infn_…` secret if it is valid and not revoked, else null. Bumps last_used_at at most once a minute. */
export async function authenticateNodeCredential(db: Db, secret: string): Promise<NodeIdentity | null> {
  if (!secret.startsWith(SECRET_PREFIX.node) || !hasValidChecksum(secret)) return null;
  const row = await db.selectFrom('nodeCredentials').select(['id', 'revokedAt', 'lastUsedAt']).where('hash', '=', hashSecret(secret)).executeTakeFirst();
  if (!row || row.revokedAt !== null) return null;
  if (row.lastUsedAt === null || Date.now() - row.lastUsedAt.getTime() >= LAST_USED_RESOLUTION_MS) {
    await db
      .updateTable('nodeCredentials')
      .set({ lastUsedAt: sql<Date>`now()` })
      .where('id', '=', row.id)
      .execute();
  }
  return { credentialId: row.id };
}

/** True while the credential exists and is not revoked (open streams re-check with this). */
export async function nodeCredentialActive(db: Db, id: string): Promise<boolean> {
  const row = await db.selectFrom('nodeCredentials').select('revokedAt').where('id', '=', id).executeTakeFirst();
  return row !== undefined && row.revokedAt === null;
}
