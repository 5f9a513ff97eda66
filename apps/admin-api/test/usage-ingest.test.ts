import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackends } from '@infer/db/testing';
import type { UsageRecord } from '@infer/shared';
import { issueAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createEntry, getEntryByName } from '../src/modules/catalog/catalog.service.ts';
import {
  closeReplicaInterval,
  heartbeatReplicaIntervals,
  openReplicaInterval,
  reopenReplicaIntervals,
  switchReplicaPhase,
} from '../src/modules/deployments/gpu-ledger.ts';
import { listApiKeys } from '../src/modules/keys/keys.service.ts';
import { getTenantBySlug } from '../src/modules/tenants/tenants.service.ts';
import { summariseUsage } from '../src/modules/usage/usage.service.ts';
import { seedDemo } from '../src/seed.ts';
import { NODE_TOKEN, startTestApp, type TestApp } from './helpers.ts';

const headers = { authorization: `Bearer ${NODE_TOKEN}`, 'content-type': 'application/json' };

describe.each(testBackends())('usage ingest (%s)', (kind) => {
  let t: TestApp;
  let base: Omit<UsageRecord, 'requestId'>;

  beforeAll(async () => {
    t = await startTestApp(kind);
    await seedDemo(t.database.db, { simBasePort: 19000 });
    const tenant = (await getTenantBySlug(t.database.db, 'demo'))!;
    const entry = (await getEntryByName(t.database.db, 'Llama-3.3-70B-Instruct'))!;
    const key = (await listApiKeys(t.database.db, tenant.id))[0]!;
    base = {
      tenantId: tenant.id,
      keyId: key.id,
      endpointId: entry.id,
      deploymentId: null,
      mode: 'shared',
      model: entry.name,
      promptTokens: 1_000_000,
      completionTokens: 500_000,
      estimated: false,
      status: 200,
      ttftMs: 120,
      latencyMs: 900,
      startedAt: new Date().toISOString(),
    };
  });
  afterAll(async () => t?.close());

  const post = (body: unknown) =>
    fetch(`${t.baseUrl}/internal/v1/usage`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('stores a batch once, reporting duplicates on retry, and prices shared usage', async () => {
    const records = [
      { ...base, requestId: `req-${randomUUID()}` },
      { ...base, requestId: `req-${randomUUID()}`, mode: 'dedicated' as const, promptTokens: 10, completionTokens: 20 },
    ];
    const first = await post({ records });
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ accepted: 2, duplicates: 0, rejected: 0, rejectedRequestIds: [] });
    const again = await post({ records });
    expect(await again.json()).toEqual({ accepted: 0, duplicates: 2, rejected: 0, rejectedRequestIds: [] });

    const rows = await t.database.db
      .selectFrom('usageRecords')
      .select(['requestId', 'costUsd', 'mode'])
      .where(
        'requestId',
        'in',
        records.map((r) => r.requestId),
      )
      .execute();
    expect(rows).toHaveLength(2);
    const shared = rows.find((r) => r.mode === 'shared')!;
    expect(shared.costUsd).toBeCloseTo(0.59 + 0.5 * 0.79, 6);
    expect(rows.find((r) => r.mode === 'dedicated')!.costUsd).toBe(0);

    const key = (await listApiKeys(t.database.db, base.tenantId)).find((k) => k.id === base.keyId)!;
    expect(key.lastUsedAt).not.toBeNull();

    const tenantToken = { kind: 'admin_token', tokenId: 'ci', userId: null, tenantId: base.tenantId } as const;
    const summary = await summariseUsage(t.database.db, tenantToken, {
      tenantId: base.tenantId,
      from: new Date(Date.now() - 86_400_000),
      to: new Date(Date.now() + 86_400_000),
    });
    expect(summary.totals.requests).toBe(2);
    expect(summary.totals.promptTokens).toBe(1_000_010);
    expect(summary.byDay).toHaveLength(1);
    expect(summary.byEndpoint.map((e) => [e.name, e.mode]).sort()).toEqual([
      ['Llama-3.3-70B-Instruct', 'dedicated'],
      ['Llama-3.3-70B-Instruct', 'shared'],
    ]);
  });

  /** A UTC day of its own, `daysBack` days ago, so other tests' records stay out of its sums. */
  const dayOf = (daysBack: number) => new Date(Math.floor(Date.now() / 86_400_000 - daysBack) * 86_400_000);
  const daySummary = (day: Date) =>
    summariseUsage(
      t.database.db,
      { kind: 'admin_token', tokenId: 'ci', userId: null, tenantId: base.tenantId },
      { tenantId: base.tenantId, from: day, to: new Date(day.getTime() + 86_400_000) },
    );
  /** 1000 s of the seeded deployment on 4 GPUs (Llama, $2.50 per GPU-hour), from 60 s into `day`, at `price` (absent: none stored). */
  async function llamaThousandSeconds(day: Date, price?: number): Promise<void> {
    const db = t.database.db;
    const llama = (await getEntryByName(db, 'Llama-3.3-70B-Instruct'))!;
    expect(llama.dedicatedPricePerGpuHour).toBe(2.5);
    const deployment = await db.selectFrom('deployments').select('id').where('tenantId', '=', base.tenantId).executeTakeFirstOrThrow();
    const at = (sec: number) => new Date(day.getTime() + sec * 1000);
    await db
      .insertInto('replicaIntervals')
      .values({
        replicaId: randomUUID(),
        deploymentId: deployment.id,
        tenantId: base.tenantId,
        entryId: llama.id,
        gpuCount: 4,
        phase: 'serving',
        ...(price === undefined ? {} : { usdPerGpuHour: price }),
        startedAt: at(60),
        endedAt: at(1060),
        lastHeartbeatAt: at(1060),
      })
      .execute();
  }

  it('reopens, from now and in its last phase, the interval of a replica a leader still runs after another leader closed it', async () => {
    const db = t.database.db;
    const llama = (await getEntryByName(db, 'Llama-3.3-70B-Instruct'))!;
    const deployment = await db.selectFrom('deployments').select('id').where('tenantId', '=', base.tenantId).executeTakeFirstOrThrow();
    const replicaId = randomUUID();
    const r = { replicaId, deploymentId: deployment.id, tenantId: base.tenantId, entryId: llama.id, gpuCount: 4 };
    await openReplicaInterval(db, r);
    await switchReplicaPhase(db, replicaId, 'serving');
    await closeReplicaInterval(db, replicaId); // the other leader's closeStaleReplicaIntervals
    const open = () => db.selectFrom('replicaIntervals').selectAll().where('replicaId', '=', replicaId).where('endedAt', 'is', null).execute();
    expect(await open()).toEqual([]);
    expect(await reopenReplicaIntervals(db, [replicaId, randomUUID(), 'not-a-uuid'])).toBe(1);
    const [reopened] = await open();
    expect(reopened).toMatchObject({ phase: 'serving', gpuCount: 4, deploymentId: deployment.id, tenantId: base.tenantId, usdPerGpuHour: 2.5 });
    // Already open: nothing more.
    expect(await reopenReplicaIntervals(db, [replicaId])).toBe(0);
    expect(await open()).toHaveLength(1);
    await closeReplicaInterval(db, replicaId);
  });

  it("prices the seeded deployment's GPU time at its dedicated price and answers money rounded to 8 places", async () => {
    const day = dayOf(10);
    const at = (sec: number) => new Date(day.getTime() + sec * 1000);
    // 1000 s on 4 GPUs at $2.50 per GPU-hour: $2.777...
    await llamaThousandSeconds(day, 2.5);
    // Two shared requests whose prices sum to 0.0000039399999999999995 in floating point.
    const records = [
      { ...base, requestId: `req-${randomUUID()}`, promptTokens: 1, completionTokens: 1, startedAt: at(10).toISOString() },
      { ...base, requestId: `req-${randomUUID()}`, promptTokens: 3, completionTokens: 1, startedAt: at(20).toISOString() },
    ];
    expect(await (await post({ records })).json()).toMatchObject({ accepted: 2 });

    const summary = await daySummary(day);
    const cost = (mode: string) => summary.byEndpoint.find((e) => e.mode === mode)?.costUsd;
    expect(cost('dedicated')).toBe(2.77777778);
    expect(cost('shared')).toBe(0.00000394);
    expect(summary.totals.costUsd).toBe(2.77778172);
    expect(summary.byDay.map((d) => d.costUsd)).toEqual([2.77778172]);
  });

  it('prices an interval a control plane from before the price column wrote (a rolling deploy) at its entry price', async () => {
    const day = dayOf(11);
    await llamaThousandSeconds(day);
    expect((await daySummary(day)).byEndpoint.find((e) => e.mode === 'dedicated')?.costUsd).toBe(2.77777778); // 1000 s x 4 GPUs at $2.50
  });

  it('never reprices past GPU time: each interval keeps the price it ran at, and a running one splits at the change', async () => {
    const db = t.database.db;
    // An entry of its own, so its row holds only this test's GPU time (the ledger has no foreign keys).
    const entry = await createEntry(db, { name: 'Repriced-8B', offeredDedicated: true, dedicatedPricePerGpuHour: 2 });
    const replica = (replicaId: string) => ({ replicaId, deploymentId: randomUUID(), tenantId: base.tenantId, entryId: entry.id, gpuCount: 4 });
    const platform = (await issueAdminToken(db, { name: 'infra', tenantId: null })).secret;
    const gql = async <T>(query: string, variables: Record<string, unknown> = {}): Promise<T> => {
      const res = await fetch(`${t.baseUrl}/graphql`, {
        method: 'POST',
        headers: { authorization: `Bearer ${platform}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      });
      const body = (await res.json()) as { data?: T; errors?: unknown[] };
      expect(body.errors).toBeUndefined();
      return body.data!;
    };
    const setPrice = (price: string) =>
      gql(`mutation($id: ID!, $p: String!) { updateCatalogEntry(id: $id, input: { dedicatedPrice: $p }) { dedicatedPrice } }`, { id: entry.id, p: price });
    type Row = { name: string; mode: string; gpuSeconds: number; costUsd: number };
    const usage = async () => {
      const data = await gql<{ tenant: { usage: { byEndpoint: Row[] } } }>(
        `{ tenant(slug: "demo") { usage { byEndpoint { name mode gpuSeconds costUsd } } } }`,
      );
      return data.tenant.usage.byEndpoint.find((e) => e.name === entry.name && e.mode === 'DEDICATED')!;
    };
    const run = async (replicaId: string) => {
      await new Promise((r) => setTimeout(r, 300));
      await heartbeatReplicaIntervals(db, [replicaId]);
    };

    // QA's repro: GPU time of a stopped replica at $2 per GPU-hour, then the price goes to $100.
    const stopped = randomUUID();
    await openReplicaInterval(db, replica(stopped));
    await run(stopped);
    await closeReplicaInterval(db, stopped);
    const past = await usage();
    expect(past.gpuSeconds).toBeGreaterThan(0);
    expect(past.costUsd).toBeCloseTo((past.gpuSeconds / 3600) * 2, 7);
    expect(await setPrice('$100 per GPU-hour')).toEqual({ updateCatalogEntry: { dedicatedPrice: '$100.00 per GPU-hour' } });
    expect(await usage()).toEqual(past);

    // New time is priced at the new rate; a replica running through the next change ($50) is split there:
    // before it at $100, after it (and in any phase it switches to) at $50.
    const running = randomUUID();
    await openReplicaInterval(db, replica(running));
    await run(running);
    await setPrice('$50 per GPU-hour');
    await run(running);
    await switchReplicaPhase(db, running, 'serving');
    await run(running);
    await closeReplicaInterval(db, running);
    const rows = await db
      .selectFrom('replicaIntervals')
      .select(['phase', 'usdPerGpuHour', 'startedAt', 'endedAt'])
      .where('replicaId', '=', running)
      .orderBy('startedAt')
      .orderBy('id')
      .execute();
    expect(rows.map((r) => [r.phase, r.usdPerGpuHour])).toEqual([
      ['boot', 100],
      ['boot', 50],
      ['serving', 50],
    ]);
    expect(rows[1]!.startedAt).toEqual(rows[0]!.endedAt); // split at one instant: nothing lost, nothing twice
    const seconds = (r: (typeof rows)[number]) => ((r.endedAt!.getTime() - r.startedAt.getTime()) / 1000) * 4;
    const now = await usage();
    expect(now.gpuSeconds).toBeCloseTo(past.gpuSeconds + rows.reduce((acc, r) => acc + seconds(r), 0), 3);
    expect(now.costUsd).toBeCloseTo(past.costUsd + rows.reduce((acc, r) => acc + (seconds(r) / 3600) * r.usdPerGpuHour!, 0), 7);
  });

  it('refuses a range bound an offset moves out of the years 0001 to 9999 (UTC), naming it, on any surface (not a database error)', async () => {
    // Review finding: tRPC took "0001-01-01T00:00:00+14:00" (year 0000 in UTC) to the database: a 500 on PGlite.
    const token = { kind: 'admin_token', tokenId: 'ci', userId: null, tenantId: base.tenantId } as const;
    await expect(
      summariseUsage(t.database.db, token, { tenantId: base.tenantId, from: new Date('0001-01-01T00:00:00+14:00'), to: new Date('0001-06-01T00:00:00Z') }),
    ).rejects.toMatchObject({
      code: 'invalid',
      param: 'from',
      message: 'from must be a date of the years 0001 to 9999 (UTC)',
    });
    await expect(
      summariseUsage(t.database.db, token, { tenantId: base.tenantId, from: new Date('9999-12-31T00:00:00Z'), to: new Date('9999-12-31T23:59:59-14:00') }),
    ).rejects.toMatchObject({
      code: 'invalid',
      param: 'to',
    });
  });

  it('dedupes within one batch too', async () => {
    const r = { ...base, requestId: `req-${randomUUID()}` };
    expect(await (await post({ records: [r, r] })).json()).toEqual({ accepted: 1, duplicates: 1, rejected: 0, rejectedRequestIds: [] });
  });

  it('rejects a bad body with an OpenAI-shaped 400', async () => {
    for (const body of [{ records: [{ requestId: 'x' }] }, { nope: true }, '{not json']) {
      const res = await post(body);
      expect(res.status).toBe(400);
      const json = (await res.json()) as { error: { type: string; message: string; code: string } };
      expect(json.error.type).toBe('invalid_request_error');
      expect(json.error.message).toBeTruthy();
      expect(JSON.stringify(json)).not.toMatch(/stack|at .*\.ts/);
    }
  });

  it('requires the node token', async () => {
    const res = await fetch(`${t.baseUrl}/internal/v1/usage`, { method: 'POST', body: '{"records":[]}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(401);
  });
});
