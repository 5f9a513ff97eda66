import { sql } from 'kysely';
import type { JsonObject } from '@infer/db';
import { isUuid, type Db } from '../../db.ts';
import { notFound, ServiceError } from '../../errors.ts';
import { isPlatformAdmin, requirePlatformAdmin } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { writeAudit } from '../audit/audit.service.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { runtimeConfigSchema, type RuntimeConfig } from '../deployments/provisioners/kubernetes/runtime-config.ts';

/**
 * Validates a runtime configuration given as an object or as JSON text; errors name the field
 * (`runtimeConfig.extraArgs.0`). Null or `{}` clears it.
 */
export function parseRuntimeConfigInput(value: unknown): RuntimeConfig | null {
  if (value === null || value === undefined) return null;
  let raw: unknown = value;
  if (typeof value === 'string') {
    if (value.trim() === '') return null;
    try {
      raw = JSON.parse(value);
    } catch {
      throw new ServiceError('invalid', 'runtimeConfig: must be a JSON object', 'runtimeConfig');
    }
  }
  const parsed = runtimeConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = ['runtimeConfig', ...(issue?.path ?? []).map(String)].join('.');
    throw new ServiceError('invalid', `${field}: ${issue?.message ?? 'invalid'}`, field);
  }
  return Object.keys(parsed.data).length === 0 ? null : parsed.data;
}

/** Platform admins: an entry's runtime configuration (null: the provisioner's defaults). */
export async function adminGetRuntimeConfig(db: Db, principal: Principal, entryId: string): Promise<RuntimeConfig | null> {
  requirePlatformAdmin(principal);
  if (!isUuid(entryId)) throw notFound('catalog entry');
  const row = await db.selectFrom('catalogEntries').select('runtimeConfig').where('id', '=', entryId).executeTakeFirst();
  if (!row) throw notFound('catalog entry');
  return (row.runtimeConfig as RuntimeConfig | null) ?? null;
}

/** An entry's runtime configuration as the public Endpoint type shows it: to platform admins; null for anyone else. */
export async function viewRuntimeConfig(db: Db, principal: Principal, entryId: string): Promise<RuntimeConfig | null> {
  return isPlatformAdmin(principal) ? adminGetRuntimeConfig(db, principal, entryId) : null;
}

/** Platform admins: sets how the entry's dedicated replicas run on Kubernetes; applies to replicas started from now on. */
export async function adminSetRuntimeConfig(db: Db, principal: Principal, entryId: string, value: unknown): Promise<RuntimeConfig | null> {
  requirePlatformAdmin(principal);
  if (!isUuid(entryId)) throw notFound('catalog entry');
  const config = parseRuntimeConfigInput(value);
  return withTransaction(db, async (trx) => {
    const row = await trx
      .updateTable('catalogEntries')
      .set({ runtimeConfig: config as JsonObject | null, updatedAt: sql<Date>`now()` })
      .where('id', '=', entryId)
      .returning('id')
      .executeTakeFirst();
    if (!row) throw notFound('catalog entry');
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: null,
      action: 'catalog.runtime_config',
      targetType: 'catalog_entry',
      targetId: entryId,
      detail: { fields: config ? Object.keys(config) : [] },
    });
    return config;
  });
}
