// Finding 8 (issue 9): upstream provider API keys were in clear in the database, the config outbox and
// the node's snapshot file. They are sealed at rest (AES-256-GCM) and opened only in memory: when the
// control plane serves the authenticated node channel, and in the node's routing state.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addUpstream, buildAdminApp, createApiKey, createEntry, createTenant } from '@infer/admin-api';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { buildDataplaneApp, createConfigClient, createConfigStore, type ConfigClient } from '@infer/dataplane';
import { createRuntimeSim, type RuntimeSim } from '@infer/runtime-sim';
import { installSecretKeyring, parseKeyring } from '../apps/admin-api/src/modules/secrets/secret-keyring.ts';
import { resealUpstreamKeys } from '../apps/admin-api/src/modules/secrets/upstream-secrets.ts';
import { NODE_TOKEN, waitFor } from './platform-helpers.ts';

const PROVIDER_KEY = `sk-provider-${randomBytes(12).toString('hex')}`;
const key = (): string => randomBytes(32).toString('base64');

describe.each(testBackends())('upstream API keys at rest (%s)', (kind) => {
  let database: TestDatabase;
  let sim: RuntimeSim;
  let dir: string;
  let admin: Awaited<ReturnType<typeof buildAdminApp>>;
  let adminUrl: string;
  let secret: string;
  let entryId: string;
  const k1 = `k1:${key()}`;

  beforeAll(async () => {
    installSecretKeyring(parseKeyring(k1));
    database = await createTestDb(kind);
    // The runtime refuses any request without the provider key.
    sim = createRuntimeSim({ models: ['org/served'], apiKey: PROVIDER_KEY });
    const simUrl = (await sim.listen(0)).url;
    const tenant = await createTenant(database.db, { slug: 'acme', name: 'Acme' });
    entryId = (
      await createEntry(database.db, { name: 'Model-One', provider: 'org', offeredShared: true, published: true, priceInputPerM: 1, priceOutputPerM: 1 })
    ).id;
    await addUpstream(database.db, { entryId, url: simUrl, kind: 'sim', servedModel: 'org/served', apiKey: PROVIDER_KEY });
    secret = (await createApiKey(database.db, { tenantId: tenant.id, name: 'k' })).secret;
    admin = await buildAdminApp({
      db: database.db,
      dbKind: database.kind,
      pgPool: database.pool,
      nodeToken: NODE_TOKEN,
      publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
    });
    await admin.listen({ port: 0, host: '127.0.0.1' });
    adminUrl = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
    dir = mkdtempSync(join(tmpdir(), 'upstream-secrets-'));
  });
  afterAll(async () => {
    await admin?.close();
    await sim?.close();
    await database?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the database row and the outbox row hold no plaintext key', async () => {
    const row = { rows: await database.db.selectFrom('endpointUpstreams').select('apiKey').where('entryId', '=', entryId).execute() };
    expect(row.rows[0]!.apiKey!).toMatch(/^enc:v1:k1:/);
    expect(row.rows[0]!.apiKey!).not.toContain(PROVIDER_KEY);
    const outbox = {
      rows: (await database.db.selectFrom('configOutbox').select('payload').where('entityId', '=', entryId).execute()).map((o) => ({
        payload: JSON.stringify(o.payload),
      })),
    };
    expect(outbox.rows.length).toBeGreaterThan(0);
    for (const o of outbox.rows) expect(o.payload).not.toContain(PROVIDER_KEY);
    expect(outbox.rows.some((o) => o.payload.includes('enc:v1:k1:'))).toBe(true);
  });

  it('only an authenticated node gets the key, in memory; the snapshot file seals it; the runtime gets the right bearer', async () => {
    expect((await fetch(`${adminUrl}/internal/v1/config/snapshot`)).status).toBe(401);
    const served = await (await fetch(`${adminUrl}/internal/v1/config/snapshot`, { headers: { authorization: `Bearer ${NODE_TOKEN}` } })).text();
    expect(served).toContain(PROVIDER_KEY);

    const snapshotFile = join(dir, 'snapshot.json');
    const startNode = async (url: string): Promise<{ client: ConfigClient; chat: () => Promise<number>; close: () => Promise<void> }> => {
      const store = createConfigStore();
      const client = createConfigClient({ url, nodeToken: NODE_TOKEN, store, snapshotFile, minBackoffMs: 50, maxBackoffMs: 200 });
      client.start();
      const dp = buildDataplaneApp({ store, usage: { record() {} } });
      await dp.listen({ port: 0, host: '127.0.0.1' });
      const dpUrl = `http://127.0.0.1:${(dp.server.address() as AddressInfo).port}`;
      await waitFor(async () => store.view !== null && (store.version ?? 0) > 0, 5000);
      const chat = async (): Promise<number> => {
        const res = await fetch(`${dpUrl}/endpoints/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'Model-One', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
        });
        await res.arrayBuffer();
        return res.status;
      };
      return {
        client,
        chat,
        close: async () => {
          await dp.close();
          await client.close();
        },
      };
    };

    const node = await startNode(adminUrl);
    expect(await node.chat()).toBe(200); // the sim checked `Authorization: Bearer <provider key>`
    await waitFor(async () => {
      try {
        return readFileSync(snapshotFile, 'utf8').includes('enc:v1:node:');
      } catch {
        return false;
      }
    }, 5000);
    expect(readFileSync(snapshotFile, 'utf8')).not.toContain(PROVIDER_KEY);
    await node.close();

    // A node restarted from its file alone (control plane unreachable) still sends the right bearer.
    const offline = await startNode('http://127.0.0.1:9');
    expect(await offline.chat()).toBe(200);
    await offline.close();
  });

  it('rotation: a new key first re-seals the rows and outbox at start-up; the old key can then go', async () => {
    const k2 = `k2:${key()}`;
    installSecretKeyring(parseKeyring(`${k2},${k1}`));
    expect(await resealUpstreamKeys(database.db)).toBeGreaterThan(0);
    const row = { rows: await database.db.selectFrom('endpointUpstreams').select('apiKey').where('entryId', '=', entryId).execute() };
    expect(row.rows[0]!.apiKey!).toMatch(/^enc:v1:k2:/);
    const outbox = {
      rows: (await database.db.selectFrom('configOutbox').select('payload').where('entityId', '=', entryId).execute()).map((o) => ({
        payload: JSON.stringify(o.payload),
      })),
    };
    for (const o of outbox.rows) expect(o.payload).not.toContain('enc:v1:k1:');

    installSecretKeyring(parseKeyring(k2)); // k1 retired
    const served = await (await fetch(`${adminUrl}/internal/v1/config/snapshot`, { headers: { authorization: `Bearer ${NODE_TOKEN}` } })).text();
    expect(served).toContain(PROVIDER_KEY);
    expect(() => parseKeyring('k3:c2hvcnQ=')).toThrow(/32 bytes/);
  });
});
