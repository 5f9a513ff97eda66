import { sql } from 'kysely';
import type { ConfigDelta, ConfigEntityKind, ConfigSnapshot } from '@infer/shared';
import type { JsonObject } from '@infer/db';
import type { Db } from '../../db.ts';
import { markChanged } from './outbox.ts';
import { selectDeploymentForms, selectEndpointForms, selectKeyForms, selectTenantForms } from './snapshot-forms.ts';

/** Serialises outbox writers so sequence numbers commit in order (readers never see a gap filled later). */
const OUTBOX_LOCK_KEY = 7_260_411;
/** Postgres NOTIFY channel that wakes every control-plane replica. */
export const OUTBOX_CHANNEL = 'config_outbox';

async function loadForm(trx: Db, kind: ConfigEntityKind, id: string): Promise<JsonObject | null> {
  const ids = [id];
  const rows =
    kind === 'tenant'
      ? await selectTenantForms(trx, ids)
      : kind === 'key'
        ? await selectKeyForms(trx, ids)
        : kind === 'endpoint'
          ? await selectEndpointForms(trx, ids)
          : await selectDeploymentForms(trx, ids);
  return (rows[0] as JsonObject | undefined) ?? null;
}

/**
 * Writes the entity's current data-plane form to the config outbox ('delete' when it is gone or no
 * longer usable). Call inside the transaction of the mutation; returns the new config version.
 */
export async function recordChange(trx: Db, kind: ConfigEntityKind, entityId: string): Promise<number> {
  if (!trx.isTransaction) throw new Error('recordChange must run inside a transaction');
  await sql`select pg_advisory_xact_lock(${OUTBOX_LOCK_KEY})`.execute(trx);
  const payload = await loadForm(trx, kind, entityId);
  const { seq } = await trx
    .insertInto('configOutbox')
    .values({ kind, entityId, op: payload ? 'upsert' : 'delete', payload })
    .returning('seq')
    .executeTakeFirstOrThrow();
  await sql`select pg_notify(${OUTBOX_CHANNEL}, ${String(seq)})`.execute(trx);
  markChanged(trx);
  return Number(seq);
}

async function maxSeq(db: Db): Promise<number> {
  const row = await db
    .selectFrom('configOutbox')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .executeTakeFirst();
  return row?.seq == null ? 0 : Number(row.seq);
}

/** The current config version (0 before any change). */
export const currentVersion = (db: Db): Promise<number> => maxSeq(db);

/** The whole routing state, consistent with its version (one repeatable-read transaction). */
export async function buildSnapshot(db: Db): Promise<ConfigSnapshot> {
  const read = async (trx: Db): Promise<ConfigSnapshot> => {
    const version = await maxSeq(trx);
    const tenants = await selectTenantForms(trx);
    const keys = await selectKeyForms(trx);
    const endpoints = await selectEndpointForms(trx);
    const deployments = await selectDeploymentForms(trx);
    return { version, tenants, keys, endpoints, deployments };
  };
  if (db.isTransaction) return read(db);
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(read);
}

interface OutboxRow {
  seq: number;
  kind: ConfigEntityKind;
  entityId: string;
  op: 'upsert' | 'delete';
  payload: unknown;
}

/** An outbox row as the delta nodes receive. */
export function toDelta(row: OutboxRow): ConfigDelta {
  const value = row.op === 'delete' ? null : row.payload;
  return { version: Number(row.seq), kind: row.kind, id: row.entityId, op: row.op, value } as ConfigDelta;
}

/** Outbox rows after `afterSeq`, oldest first, at most `limit`. */
export async function readDeltasAfter(db: Db, afterSeq: number, limit = 1000): Promise<ConfigDelta[]> {
  const rows = await db
    .selectFrom('configOutbox')
    .select(['seq', 'kind', 'entityId', 'op', 'payload'])
    .where('seq', '>', afterSeq)
    .orderBy('seq')
    .limit(limit)
    .execute();
  return rows.map(toDelta);
}

/**
 * The deltas a node that holds version `since` needs, or null when the outbox cannot serve them
 * contiguously (row `since` no longer or never existed, or the node is too far behind): send a snapshot.
 */
export async function deltasSince(db: Db, since: number, maxDeltas = 5000): Promise<ConfigDelta[] | null> {
  if (!Number.isSafeInteger(since) || since <= 0) return null;
  const rows = await db
    .selectFrom('configOutbox')
    .select(['seq', 'kind', 'entityId', 'op', 'payload'])
    .where('seq', '>=', since)
    .orderBy('seq')
    .limit(maxDeltas + 2)
    .execute();
  const first = rows[0];
  if (!first || Number(first.seq) !== since || rows.length > maxDeltas + 1) return null;
  return rows.slice(1).map(toDelta);
}
