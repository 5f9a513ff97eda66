import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackends } from '@infer/db/testing';
import { applyDeltas, configDeltaSchema, configSnapshotSchema, type ConfigDelta, type ConfigSnapshot } from '@infer/shared';
import { loadEnv } from '../src/env.ts';
import { createApiKey, revokeApiKey } from '../src/modules/keys/keys.service.ts';
import { outboxRowCount, pruneOutbox, startOutboxPruner } from '../src/modules/snapshots/outbox-prune.ts';
import { buildSnapshot, currentVersion, deltasSince } from '../src/modules/snapshots/snapshots.service.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';
import { seedDemo } from '../src/seed.ts';
import { NODE_TOKEN, sseReader, startTestApp, type TestApp } from './helpers.ts';

const auth = { authorization: `Bearer ${NODE_TOKEN}` };

function normalise(s: ConfigSnapshot): ConfigSnapshot {
  const byId = <T extends { id: string }>(list: T[]) => [...list].sort((a, b) => a.id.localeCompare(b.id));
  return { version: s.version, tenants: byId(s.tenants), keys: byId(s.keys), endpoints: byId(s.endpoints), deployments: byId(s.deployments) };
}

async function oldestSeq(t: TestApp): Promise<number> {
  const row = await t.database.db
    .selectFrom('configOutbox')
    .select((eb) => eb.fn.min('seq').as('seq'))
    .executeTakeFirst();
  return Number(row?.seq ?? 0);
}

describe('outbox retention env', () => {
  const base = { NODE_TOKEN: 'x'.repeat(16) };
  it('defaults to 10,000 rows, 24 hours, every 10 minutes', () => {
    const env = loadEnv(base);
    expect(env.OUTBOX_RETAIN_ROWS).toBe(10_000);
    expect(env.OUTBOX_RETAIN_HOURS).toBe(24);
    expect(env.OUTBOX_PRUNE_INTERVAL_S).toBe(600);
  });
  it('reads the variables and names each bad value', () => {
    const env = loadEnv({ ...base, OUTBOX_RETAIN_ROWS: '500', OUTBOX_RETAIN_HOURS: '1.5', OUTBOX_PRUNE_INTERVAL_S: '60' });
    expect([env.OUTBOX_RETAIN_ROWS, env.OUTBOX_RETAIN_HOURS, env.OUTBOX_PRUNE_INTERVAL_S]).toEqual([500, 1.5, 60]);
    expect(() => loadEnv({ ...base, OUTBOX_RETAIN_ROWS: '0' })).toThrow(/OUTBOX_RETAIN_ROWS/);
    expect(() => loadEnv({ ...base, OUTBOX_RETAIN_ROWS: 'many' })).toThrow(/OUTBOX_RETAIN_ROWS/);
    expect(() => loadEnv({ ...base, OUTBOX_RETAIN_HOURS: '-1' })).toThrow(/OUTBOX_RETAIN_HOURS/);
    expect(() => loadEnv({ ...base, OUTBOX_PRUNE_INTERVAL_S: 'soon' })).toThrow(/OUTBOX_PRUNE_INTERVAL_S/);
  });
});

describe.each(testBackends())('config outbox pruning (%s)', (kind) => {
  let t: TestApp;
  let tenantId: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    await seedDemo(t.database.db, { simBasePort: 19100 });
    tenantId = (await createTenant(t.database.db, { slug: 'prune', name: 'Prune' })).id;
  });
  afterAll(async () => t?.close());

  /** `n` key changes (create + revoke pairs), each one outbox row. */
  async function churn(n: number): Promise<void> {
    for (let i = 0; i < n; i += 2) {
      const k = await createApiKey(t.database.db, { tenantId, name: `churn ${i}` });
      if (i + 1 < n) await revokeApiKey(t.database.db, { tenantId, keyId: k.key.id });
    }
  }

  it('the app starts a pruner and stops it on close', async () => {
    expect(t.app.outboxPruner).toBeDefined();
    const other = await startTestApp(kind);
    const pruner = other.app.outboxPruner!;
    await other.close();
    expect(await pruner.runNow()).toBeUndefined(); // stopped: does nothing
  });

  it('bounds the row count, keeps the version and the snapshot; a node behind the cut-off gets a snapshot', async () => {
    await churn(60);
    const before = await buildSnapshot(t.database.db);
    const rowsBefore = await outboxRowCount(t.database.db);
    expect(rowsBefore).toBeGreaterThan(60);
    const stale = await oldestSeq(t); // a version a node might still hold
    expect(await deltasSince(t.database.db, stale)).not.toBeNull();

    const result = await pruneOutbox(t.database.db, { retainRows: 10, retainHours: 24 });
    expect(result.deleted).toBe(rowsBefore - 10);
    expect(await outboxRowCount(t.database.db)).toBe(10);
    expect(result.newestSeq).toBe(before.version);
    expect(await currentVersion(t.database.db)).toBe(before.version);
    expect(normalise(await buildSnapshot(t.database.db))).toEqual(normalise(before));
    expect(await deltasSince(t.database.db, stale)).toBeNull();

    // Pruning again changes nothing.
    expect((await pruneOutbox(t.database.db, { retainRows: 10, retainHours: 24 })).deleted).toBe(0);

    // A node that resumes from a pruned version gets a full snapshot, then live deltas.
    const ac = new AbortController();
    const res = await fetch(`${t.baseUrl}/internal/v1/config/stream`, {
      headers: { ...auth, 'last-event-id': String(stale) },
      signal: ac.signal,
    });
    const sse = sseReader(res.body!);
    const first = await sse.next();
    expect(first.event).toBe('snapshot');
    const snap = configSnapshotSchema.parse(JSON.parse(first.data));
    expect(first.id).toBe(String(before.version));
    expect(normalise(snap)).toEqual(normalise(before));
    const k = await createApiKey(t.database.db, { tenantId, name: 'after prune' });
    const live = await sse.next(1000);
    expect(live.event).toBe('delta');
    expect(configDeltaSchema.parse(JSON.parse(live.data))).toMatchObject({ kind: 'key', op: 'upsert', id: k.key.id });
    ac.abort();
    await sse.cancel();
  });

  it('a node at the oldest retained version still resumes with every later delta', async () => {
    await churn(6);
    await pruneOutbox(t.database.db, { retainRows: 5, retainHours: 0 });
    const from = await oldestSeq(t);
    const rows = await outboxRowCount(t.database.db);
    expect(rows).toBe(5);

    const ac = new AbortController();
    const res = await fetch(`${t.baseUrl}/internal/v1/config/stream`, {
      headers: { ...auth, 'last-event-id': String(from) },
      signal: ac.signal,
    });
    const sse = sseReader(res.body!);
    const deltas: ConfigDelta[] = [];
    for (let i = 0; i < rows - 1; i++) {
      const e = await sse.next();
      expect(e.event).toBe('delta');
      deltas.push(configDeltaSchema.parse(JSON.parse(e.data)));
    }
    expect(deltas[0]!.version).toBeGreaterThan(from);
    expect(deltas.at(-1)!.version).toBe(await currentVersion(t.database.db));
    expect(await sse.quiet(200)).toBe(true);
    ac.abort();
    await sse.cancel();
  });

  it('drops rows past the age limit but always keeps the newest row', async () => {
    await churn(4);
    const before = await buildSnapshot(t.database.db);
    // Everything but the two newest rows is two days old.
    await sql`update config_outbox set created_at = now() - interval '48 hours' where seq < ${before.version - 1}`.execute(t.database.db);
    const aged = await pruneOutbox(t.database.db, { retainRows: 10_000, retainHours: 24 });
    expect(aged.deleted).toBeGreaterThan(0);
    expect(await outboxRowCount(t.database.db)).toBe(2);

    // Every row is old: the newest (the config version) stays.
    await sql`update config_outbox set created_at = now() - interval '48 hours'`.execute(t.database.db);
    await pruneOutbox(t.database.db, { retainRows: 10_000, retainHours: 24 });
    expect(await outboxRowCount(t.database.db)).toBe(1);
    expect(await oldestSeq(t)).toBe(before.version);
    expect(await currentVersion(t.database.db)).toBe(before.version);
    expect(normalise(await buildSnapshot(t.database.db))).toEqual(normalise(before));

    // retainRows 1 keeps the newest row too; a node at that version resumes with deltas.
    expect((await pruneOutbox(t.database.db, { retainRows: 1, retainHours: 0 })).deleted).toBe(0);
    expect(await deltasSince(t.database.db, before.version)).toEqual([]);
  });

  it('the periodic pruner deletes on its own and the node view stays consistent', async () => {
    await churn(8);
    const before = await buildSnapshot(t.database.db);
    const pruned: number[] = [];
    const pruner = startOutboxPruner(t.database.db, { intervalMs: 20, retainRows: 3, retainHours: 0, onPruned: (r) => pruned.push(r.deleted) });
    try {
      await expect.poll(() => pruned.length, { timeout: 3000 }).toBeGreaterThanOrEqual(2);
      expect(pruned[0]).toBeGreaterThan(0);
      expect(await outboxRowCount(t.database.db)).toBe(3);
      expect(await currentVersion(t.database.db)).toBe(before.version);
      // What a node that held the oldest retained version ends up with equals a fresh snapshot.
      const from = await oldestSeq(t);
      const deltas = await deltasSince(t.database.db, from);
      expect(deltas).toHaveLength(2);
      expect(normalise(applyDeltas(before, deltas!))).toEqual(normalise(await buildSnapshot(t.database.db)));
    } finally {
      await pruner.stop();
    }
  });
});
