import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackends } from '@infer/db/testing';
import { applyDeltas, configDeltaSchema, configSnapshotSchema, hasValidChecksum, type ConfigDelta, type ConfigSnapshot } from '@infer/shared';
import { buildSnapshot } from '../src/modules/snapshots/snapshots.service.ts';
import { createApiKey, revokeApiKey } from '../src/modules/keys/keys.service.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';
import { seedDemo } from '../src/seed.ts';
import { NODE_TOKEN, sseReader, startTestApp, type TestApp } from './helpers.ts';

const auth = { authorization: `Bearer ${NODE_TOKEN}` };

function normalise(s: ConfigSnapshot): ConfigSnapshot {
  const byId = <T extends { id: string }>(list: T[]) => [...list].sort((a, b) => a.id.localeCompare(b.id));
  return { version: s.version, tenants: byId(s.tenants), keys: byId(s.keys), endpoints: byId(s.endpoints), deployments: byId(s.deployments) };
}

describe.each(testBackends())('config stream (%s)', (kind) => {
  let t: TestApp;
  let tenantId: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    await seedDemo(t.database.db, { simBasePort: 19000 });
    tenantId = (await createTenant(t.database.db, { slug: 'acme', name: 'Acme' })).id;
  });
  afterAll(async () => t?.close());

  it('rejects a wrong or missing node token with an OpenAI-shaped 401', async () => {
    for (const headers of [{ authorization: 'Bearer wrong-token' }, {}] as Record<string, string>[]) {
      for (const path of ['/internal/v1/config/snapshot', '/internal/v1/config/stream']) {
        const res = await fetch(`${t.baseUrl}${path}`, { headers });
        expect(res.status).toBe(401);
        const body = (await res.json()) as { error: { type: string; message: string } };
        expect(body.error.type).toBe('authentication_error');
      }
    }
  });

  it('serves the snapshot as JSON', async () => {
    const res = await fetch(`${t.baseUrl}/internal/v1/config/snapshot`, { headers: auth });
    expect(res.status).toBe(200);
    const snap = configSnapshotSchema.parse(await res.json());
    expect(snap.endpoints.length).toBeGreaterThanOrEqual(7);
    expect(snap.deployments[0]?.replicas).toHaveLength(1);
    expect(snap.version).toBe((await buildSnapshot(t.database.db)).version);
  });

  it('streams a snapshot, then deltas in order; revocation arrives as a key delete well under a second', async () => {
    const ac = new AbortController();
    const res = await fetch(`${t.baseUrl}/internal/v1/config/stream`, { headers: auth, signal: ac.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const sse = sseReader(res.body!);
    const first = await sse.next();
    expect(first.event).toBe('snapshot');
    const snapshot = configSnapshotSchema.parse(JSON.parse(first.data));
    expect(first.id).toBe(String(snapshot.version));

    const created = await createApiKey(t.database.db, { tenantId, name: 'stream test' });
    expect(hasValidChecksum(created.secret)).toBe(true);
    const upsert = await sse.next(1000);
    expect(upsert.event).toBe('delta');
    const d1 = configDeltaSchema.parse(JSON.parse(upsert.data));
    expect(d1).toMatchObject({ kind: 'key', op: 'upsert', id: created.key.id });
    expect(upsert.id).toBe(String(d1.version));
    expect(d1.version).toBeGreaterThan(snapshot.version);

    const started = performance.now();
    await revokeApiKey(t.database.db, { tenantId, keyId: created.key.id });
    const revoked = await sse.next(1000);
    const elapsed = performance.now() - started;
    const d2 = configDeltaSchema.parse(JSON.parse(revoked.data));
    expect(d2).toMatchObject({ kind: 'key', op: 'delete', id: created.key.id, value: null });
    expect(d2.version).toBeGreaterThan(d1.version);
    expect(elapsed).toBeLessThan(500);

    // The node's view after deltas equals a fresh snapshot.
    const applied = applyDeltas(snapshot, [d1, d2]);
    expect(normalise(applied)).toEqual(normalise(await buildSnapshot(t.database.db)));
    ac.abort();
    await sse.cancel();
  });

  it('resumes from Last-Event-ID with only the newer deltas', async () => {
    const base = await buildSnapshot(t.database.db);
    const a = await createApiKey(t.database.db, { tenantId, name: 'resume a' });
    const b = await createApiKey(t.database.db, { tenantId, name: 'resume b' });
    await revokeApiKey(t.database.db, { tenantId, keyId: a.key.id });

    const ac = new AbortController();
    const res = await fetch(`${t.baseUrl}/internal/v1/config/stream`, {
      headers: { ...auth, 'last-event-id': String(base.version) },
      signal: ac.signal,
    });
    const sse = sseReader(res.body!);
    const deltas: ConfigDelta[] = [];
    for (let i = 0; i < 3; i++) {
      const e = await sse.next();
      expect(e.event).toBe('delta');
      deltas.push(configDeltaSchema.parse(JSON.parse(e.data)));
    }
    expect(deltas.map((d) => [d.id, d.op])).toEqual([
      [a.key.id, 'upsert'],
      [b.key.id, 'upsert'],
      [a.key.id, 'delete'],
    ]);
    expect(deltas.map((d) => d.version)).toEqual([...deltas.map((d) => d.version)].sort((x, y) => x - y));
    expect(deltas[0]!.version).toBeGreaterThan(base.version);
    expect(await sse.quiet(300)).toBe(true);

    // Live deltas keep coming on the resumed stream.
    await revokeApiKey(t.database.db, { tenantId, keyId: b.key.id });
    const live = configDeltaSchema.parse(JSON.parse((await sse.next(1000)).data));
    expect(live).toMatchObject({ id: b.key.id, op: 'delete' });
    expect(normalise(applyDeltas(base, [...deltas, live]))).toEqual(normalise(await buildSnapshot(t.database.db)));
    ac.abort();
    await sse.cancel();
  });

  it.each(['99999999', 'not-a-number', '0'])('answers Last-Event-ID %s with a full snapshot', async (lastId) => {
    const ac = new AbortController();
    const res = await fetch(`${t.baseUrl}/internal/v1/config/stream`, {
      headers: { ...auth, 'last-event-id': lastId },
      signal: ac.signal,
    });
    const sse = sseReader(res.body!);
    const e = await sse.next();
    expect(e.event).toBe('snapshot');
    expect(configSnapshotSchema.parse(JSON.parse(e.data)).version).toBe((await buildSnapshot(t.database.db)).version);
    ac.abort();
    await sse.cancel();
  });

  it('closes open streams when the app closes', async () => {
    const other = await startTestApp(kind);
    try {
      const res = await fetch(`${other.baseUrl}/internal/v1/config/stream`, { headers: auth });
      const sse = sseReader(res.body!);
      expect((await sse.next()).event).toBe('snapshot');
      const started = performance.now();
      const closing = other.app.close();
      await expect(sse.next(2000)).rejects.toThrow('SSE stream ended');
      await closing;
      expect(performance.now() - started).toBeLessThan(1000);
    } finally {
      await other.close();
    }
  });
});
