import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { createContextInner } from '../src/trpc/context.ts';
import { createCallerFactory } from '../src/trpc/init.ts';
import { appRouter } from '../src/trpc/root.ts';
import { startTestApp, type TestApp } from './helpers.ts';
import { buildWorld, principalOf, PUBLIC_URLS, trpc, type World } from './trpc-fixtures.ts';

describe.each(testBackends())('catalog admin procedures (%s)', (kind) => {
  let database: TestDatabase;
  let world: World;
  const callerFor = async (name: keyof World['parties']) =>
    createCallerFactory(appRouter)(
      await createContextInner({ db: database.db, publicUrls: PUBLIC_URLS, principal: await principalOf(database.db, world.parties[name]) }),
    );

  beforeAll(async () => {
    database = await createTestDb(kind);
    world = await buildWorld(database.db);
  }, 60_000);
  afterAll(async () => database?.close());

  it('creates and updates entries from the spec string forms; publish makes them public', async () => {
    const admin = await callerFor('admin');
    const anon = await callerFor('anonymous');
    const created = await admin.catalog.create({
      name: 'Test-70B',
      provider: 'acme',
      parameterSize: '70B',
      concurrency: '2x',
      coldStartTtft: '5 sec',
      recommendedUseCases: 'Chat, Coding ,  Agents',
      tags: ['cline'],
      gpuCount: 4,
      contextLength: 8192,
      offeredDedicated: true,
    });
    expect(created).toMatchObject({
      parameterSize: '70B',
      parameterSizeB: 70,
      concurrency: '2x',
      coldStartTtft: '5 sec',
      useCases: ['Chat', 'Coding', 'Agents'],
      recommendedUseCases: 'Chat, Coding, Agents',
      published: false,
    });
    expect(await anon.catalog.byName({ name: 'Test-70B' })).toBeNull();
    await admin.catalog.publish({ id: created.id });
    expect((await anon.catalog.byName({ name: 'Test-70B' }))?.parameterSize).toBe('70B');

    const updated = await admin.catalog.update({ id: created.id, coldStartTtft: '12 sec', concurrency: null });
    expect(updated).toMatchObject({ coldStartTtft: '12 sec', concurrency: '', parameterSize: '70B' });
    await admin.catalog.unpublish({ id: created.id });
    expect(await anon.catalog.byName({ name: 'Test-70B' })).toBeNull();
    expect((await admin.catalog.admin.list()).some((e) => e.name === 'Test-70B')).toBe(true);

    const upstream = await admin.catalog.upstreams.add({
      entryId: created.id,
      url: 'http://127.0.0.1:9',
      kind: 'vllm',
      servedModel: 'acme/test',
      apiKey: 'upstream-secret',
    });
    expect(JSON.stringify(await admin.catalog.admin.get({ id: created.id }))).not.toContain('upstream-secret');
    await admin.catalog.upstreams.remove({ upstreamId: upstream.id });
    expect(await admin.catalog.upstreams.list({ entryId: created.id })).toEqual([]);
  });

  it('refuses an upstream URL with credentials and an API key that is not a header value, writing nothing', async () => {
    const admin = await callerFor('admin');
    const entry = await admin.catalog.create({ name: 'Upstream-Checks-8B' });
    for (const [field, input] of [
      ['url', { url: 'http://user:secret@127.0.0.1:9' }],
      ['url', { url: 'http://127.0.0.1:9/?key=secret' }],
      ['apiKey', { url: 'http://127.0.0.1:9', apiKey: 'sk-abc\r\nx-injected: 1' }],
      ['apiKey', { url: 'http://127.0.0.1:9', apiKey: 'sk-abc def' }],
      ['apiKey', { url: 'http://127.0.0.1:9', apiKey: 'sk-caf\u00e9' }],
    ] as const) {
      const err = await admin.catalog.upstreams.add({ entryId: entry.id, kind: 'vllm', servedModel: 'acme/test', ...input }).catch((e: unknown) => e);
      expect(err, JSON.stringify(input)).toBeInstanceOf(TRPCError);
      expect((err as TRPCError).code).toBe('BAD_REQUEST');
      expect((err as TRPCError).message).toContain(field);
    }
    expect(await admin.catalog.upstreams.list({ entryId: entry.id })).toEqual([]);
    // A key with every printable character is taken.
    const ok = await admin.catalog.upstreams.add({
      entryId: entry.id,
      url: 'http://127.0.0.1:9',
      kind: 'vllm',
      servedModel: 'acme/test',
      apiKey: 'sk-A.b_c~d+e/f=',
    });
    expect(ok.hasApiKey).toBe(true);
  });

  it('names the bad field in validation errors', async () => {
    const admin = await callerFor('admin');
    for (const [field, value] of [
      ['parameterSize', '70 billion'],
      ['concurrency', 'double'],
      ['coldStartTtft', '5 minutes'],
    ] as const) {
      const err = await admin.catalog.create({ name: `bad-${field}`, [field]: value }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TRPCError);
      expect((err as TRPCError).code).toBe('BAD_REQUEST');
      expect((err as TRPCError).message).toContain(field);
    }
  });

  it('keeps catalog writes to platform admins', async () => {
    for (const party of ['ownerA', 'tokenA', 'memberA'] as const) {
      const c = await callerFor(party);
      await expect(c.catalog.create({ name: `nope-${party}` })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    }
    await expect((await callerFor('anonymous')).catalog.create({ name: 'nope' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});

describe('tRPC errors over HTTP', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('pglite');
  });
  afterAll(async () => t?.close());

  it('report the offending field as data.param and never a stack', async () => {
    const res = await trpc(t.baseUrl, 'catalog.byName', { input: { name: '' } });
    expect(res.status).toBe(400);
    expect(res.body.error?.data.param).toBe('name');
    expect(JSON.stringify(res.body)).not.toContain('stack');
  });
});
