import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { DEFAULT_SUMMARY, hashSecret } from '@infer/shared';
import { verifyCredentials } from '../src/modules/auth/auth.service.ts';
import { toCatalogView } from '../src/modules/catalog/catalog-view.ts';
import { getEntryByName, listEntries } from '../src/modules/catalog/catalog.service.ts';
import { buildSnapshot } from '../src/modules/snapshots/snapshots.service.ts';
import { seedDemo } from '../src/seed.ts';

describe.each(testBackends())('seedDemo (%s)', (kind) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDb(kind);
  });
  afterAll(async () => database?.close());

  it('seeds a demo tenant, catalog, key and running deployment once', async () => {
    const { db } = database;
    const seeded = await seedDemo(db, { simBasePort: 18000 });
    expect(seeded).not.toBeNull();
    const s = seeded!;
    expect(s.tenantSlug).toBe('demo');
    // The one provider-prefixed form: the console's, and what the data plane accepts beside the Name.
    expect(s.dedicatedModel).toBe('Meta/Llama-3.3-70B-Instruct');
    expect(s.dedicatedName).toBe('Llama-3.3-70B-Instruct');
    expect(await verifyCredentials(db, s.adminEmail, s.adminPassword)).toMatchObject({ isPlatformAdmin: true });

    const entries = await listEntries(db, { publishedOnly: true });
    expect(entries.length).toBeGreaterThanOrEqual(7);
    expect(new Set(entries.map((e) => e.provider)).size).toBeGreaterThanOrEqual(5);
    expect(entries.some((e) => e.offeredShared && !e.offeredDedicated)).toBe(true);
    expect(entries.filter((e) => e.offeredShared && e.offeredDedicated).length).toBeGreaterThanOrEqual(2);

    const phi = toCatalogView((await getEntryByName(db, 'Phi-4'))!);
    expect(phi.summary).toBe(DEFAULT_SUMMARY);
    expect(phi.parameterSize).toBe('');
    const llama = toCatalogView((await getEntryByName(db, 'Llama-3.3-70B-Instruct'))!);
    expect(llama).toMatchObject({ parameterSize: '70B', concurrency: '8x', coldStartTtft: '45 sec', gpuCount: 4, contextLength: 131072 });
    expect(llama.tokenPrice).toContain('$0.59');
    // Dedicated GPU time costs something: every entry offered dedicated has a price per GPU-hour.
    expect(llama.dedicatedPrice).toBe('$2.50 per GPU-hour');
    for (const e of entries.filter((x) => x.offeredDedicated)) expect(toCatalogView(e).dedicatedPrice, e.name).toMatch(/^\$\d+(\.\d+)? per GPU-hour$/);
    expect(llama.recommendedUseCases).toBe('Chat, Reasoning, Multilingual');
    expect(toCatalogView((await getEntryByName(db, 'Qwen2.5-Coder-32B-Instruct'))!).tags).toEqual(expect.arrayContaining(['cline', 'cursor']));

    const snap = await buildSnapshot(db);
    expect(snap.version).toBeGreaterThan(0);
    expect(snap.keys.map((k) => k.hash)).toContain(hashSecret(s.apiKey));
    const ports = new Set(snap.endpoints.flatMap((e) => e.upstreams.map((u) => u.url)));
    expect(ports.size).toBe(snap.endpoints.length);
    for (const e of snap.endpoints) expect(e.upstreams[0]?.servedModel).not.toBe(e.name);
    const [dep] = snap.deployments;
    expect(dep).toMatchObject({ tenantSlug: 'demo', endpointName: 'Llama-3.3-70B-Instruct', state: 'running', provider: 'Meta' });
    expect(dep!.replicas).toHaveLength(1);
    expect(ports.has(dep!.replicas[0]!.url)).toBe(false);

    const outboxBefore = snap.version;
    expect(await seedDemo(db, { simBasePort: 18000 })).toBeNull();
    expect((await buildSnapshot(db)).version).toBe(outboxBefore);
    expect((await listEntries(db)).length).toBe(entries.length);
  });
});
