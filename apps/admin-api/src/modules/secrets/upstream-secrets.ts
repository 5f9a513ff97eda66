// Upstream provider API keys: sealed in the database and the config outbox, opened only in memory when
// a config snapshot or delta is served to an authenticated node.
import type { ConfigDelta, ConfigSnapshot, SnapshotEndpoint } from '@infer/shared';
import type { JsonObject } from '@infer/db';
import type { Db } from '../../db.ts';
import { needsReseal, openStoredSecret, sealStoredSecret } from './secret-keyring.ts';

function open(stored: string): string | null {
  try {
    return openStoredSecret(stored);
  } catch (err) {
    // A key missing from the keyring must not stop the whole feed: this upstream goes without its key.
    process.emitWarning(`upstream API key cannot be opened: ${(err as Error).message}`, 'SecretsWarning');
    return null;
  }
}

function revealEndpoint(e: SnapshotEndpoint): SnapshotEndpoint {
  if (!e.upstreams.some((u) => u.apiKey !== null)) return e;
  return { ...e, upstreams: e.upstreams.map((u) => (u.apiKey === null ? u : { ...u, apiKey: open(u.apiKey) })) };
}

/** The snapshot with upstream API keys in clear (for the node channel only; never stored). */
export const revealSnapshot = (s: ConfigSnapshot): ConfigSnapshot => ({ ...s, endpoints: s.endpoints.map(revealEndpoint) });

/** The delta with upstream API keys in clear (for the node channel only; never stored). */
export function revealDelta(d: ConfigDelta): ConfigDelta {
  if (d.kind !== 'endpoint' || d.value === null) return d;
  return { ...d, value: revealEndpoint(d.value as SnapshotEndpoint) } as ConfigDelta;
}

/**
 * Seals upstream API keys still in clear (rows from before encryption) or sealed with a key that is no
 * longer the current one (a rotation), in the table and in the outbox payloads. Run at start-up; returns
 * how many values it rewrote.
 */
export async function resealUpstreamKeys(db: Db): Promise<number> {
  let rewritten = 0;
  const rows = await db.selectFrom('endpointUpstreams').select(['id', 'apiKey']).where('apiKey', 'is not', null).execute();
  for (const r of rows) {
    if (r.apiKey === null || !needsReseal(r.apiKey)) continue;
    await db
      .updateTable('endpointUpstreams')
      .set({ apiKey: sealStoredSecret(openStoredSecret(r.apiKey)) })
      .where('id', '=', r.id)
      .where('apiKey', '=', r.apiKey)
      .execute();
    rewritten++;
  }
  const outbox = await db.selectFrom('configOutbox').select(['seq', 'payload']).where('kind', '=', 'endpoint').where('op', '=', 'upsert').execute();
  for (const o of outbox) {
    const payload = o.payload as unknown as SnapshotEndpoint | null;
    if (!payload || !Array.isArray(payload.upstreams) || !payload.upstreams.some((u) => u.apiKey !== null && needsReseal(u.apiKey))) continue;
    const sealed = {
      ...payload,
      upstreams: payload.upstreams.map((u) =>
        u.apiKey === null || !needsReseal(u.apiKey) ? u : { ...u, apiKey: sealStoredSecret(openStoredSecret(u.apiKey)) },
      ),
    };
    await db
      .updateTable('configOutbox')
      .set({ payload: sealed as unknown as JsonObject })
      .where('seq', '=', o.seq)
      .execute();
    rewritten++;
  }
  return rewritten;
}
