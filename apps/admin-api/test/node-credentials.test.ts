import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackends } from '@infer/db/testing';
import type { UsageRecord } from '@infer/shared';
import { issueAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { createDeployment, deleteDeploymentRow } from '../src/modules/deployments/deployment-store.ts';
import { createApiKey } from '../src/modules/keys/keys.service.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';
import { NODE_TOKEN, sseReader, startTestApp, type TestApp } from './helpers.ts';

// Finding 6: usage ingest trusted tenantId/keyId from the node, and every node shared one token.
describe.each(testBackends())('node credentials and usage ingest (%s)', (kind) => {
  let t: TestApp;
  let tenantA: string;
  let tenantB: string;
  let keyA: string;
  let keyB: string;
  let entryId: string;
  let platformToken: string;
  let tenantToken: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    const db = t.database.db;
    tenantA = (await createTenant(db, { slug: 'acme', name: 'Acme' })).id;
    tenantB = (await createTenant(db, { slug: 'bravo', name: 'Bravo' })).id;
    keyA = (await createApiKey(db, { tenantId: tenantA, name: 'a' })).key.id;
    keyB = (await createApiKey(db, { tenantId: tenantB, name: 'b' })).key.id;
    entryId = (await createEntry(db, { name: 'Model-X', offeredShared: true, published: true, priceInputPerM: 1, priceOutputPerM: 1 })).id;
    platformToken = (await issueAdminToken(db, { name: 'infra', tenantId: null })).secret;
    tenantToken = (await issueAdminToken(db, { name: 'acme-ci', tenantId: tenantA })).secret;
  });
  afterAll(async () => t?.close());

  const record = (over: Partial<UsageRecord> = {}): UsageRecord => ({
    requestId: `req-${randomUUID()}`,
    tenantId: tenantA,
    keyId: keyA,
    endpointId: entryId,
    deploymentId: null,
    mode: 'shared',
    model: 'Model-X',
    promptTokens: 10,
    completionTokens: 20,
    estimated: false,
    status: 200,
    ttftMs: 5,
    latencyMs: 9,
    startedAt: new Date().toISOString(),
    ...over,
  });
  const postUsage = async (records: UsageRecord[], bearer = NODE_TOKEN) => {
    const res = await fetch(`${t.baseUrl}/internal/v1/usage`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify({ records }),
    });
    return { status: res.status, body: (await res.json()) as { accepted?: number; rejected?: number; error?: { code: string } } };
  };
  const billedTo = async (requestIds: string[]) =>
    t.database.db.selectFrom('usageRecords').select(['requestId', 'tenantId']).where('requestId', 'in', requestIds).execute();
  const gql = async (bearer: string, query: string, variables: Record<string, unknown> = {}) => {
    const res = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });

    return (await res.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] };
  };

  it("refuses a forged tenant: a record naming tenant B under tenant A's key bills nobody", async () => {
    const forged = [
      record({ tenantId: tenantB }), // A's key, B's tenant
      record({ keyId: keyB }), // B's key, A's tenant
      record({ keyId: randomUUID() }), // no such key
      record({ keyId: 'not-a-uuid' }),
    ];
    const honest = record();
    const r = await postUsage([...forged, honest]);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ accepted: 1, duplicates: 0, rejected: 4, rejectedRequestIds: forged.map((x) => x.requestId) });
    const rows = await billedTo([...forged, honest].map((x) => x.requestId));
    expect(rows).toEqual([{ requestId: honest.requestId, tenantId: tenantA }]);
  });

  it('refuses a deployment of another tenant and absurd token counts', async () => {
    const bogus = [
      record({ deploymentId: randomUUID(), mode: 'dedicated' }),
      record({ promptTokens: 10_000_001 }),
      record({ completionTokens: 2_000_000_000 }),
    ];
    const r = await postUsage(bogus);
    expect(r.body).toMatchObject({ accepted: 0, rejected: 3, rejectedRequestIds: bogus.map((x) => x.requestId) });
    expect(await billedTo(bogus.map((x) => x.requestId))).toEqual([]);
    const negative = await postUsage([record({ promptTokens: -5 })]);
    expect(negative.status).toBe(400);
  });

  it("bills a record of a deployment deleted since (its delete's audit row names the tenant), never another tenant's", async () => {
    const db = t.database.db;
    await createEntry(db, { name: 'Model-D', offeredShared: false, offeredDedicated: true, published: true });
    const mine = await createDeployment(db, { tenantId: tenantA, entryName: 'Model-D', minReplicas: 0, maxReplicas: 1, provisioner: 'local' });
    const theirs = await createDeployment(db, { tenantId: tenantB, entryName: 'Model-D', minReplicas: 0, maxReplicas: 1, provisioner: 'local' });
    // Deleted while their last requests' records were still on their way (a stream cut by the delete, a spool).
    await deleteDeploymentRow(db, { tenantId: tenantA, deploymentId: mine.id });
    await deleteDeploymentRow(db, { tenantId: tenantB, deploymentId: theirs.id });
    const cut = record({ deploymentId: mine.id, mode: 'dedicated', completionTokens: 20 });
    const forged = record({ deploymentId: theirs.id, mode: 'dedicated' }); // A's key, B's deleted deployment
    const r = await postUsage([cut, forged]);
    expect(r.body).toEqual({ accepted: 1, duplicates: 0, rejected: 1, rejectedRequestIds: [forged.requestId] });
    expect(await billedTo([cut.requestId, forged.requestId])).toEqual([{ requestId: cut.requestId, tenantId: tenantA }]);
  });

  it('issues per-node credentials to platform admins only, shown once, listed, audited', async () => {
    const denied = await gql(tenantToken, `mutation { createNodeCredential(name: "n") { secret } }`);
    expect(denied.errors?.[0]?.extensions?.code).toBe('forbidden');
    const deniedList = await gql(tenantToken, `{ nodeCredentials { id } }`);
    expect(deniedList.errors?.[0]?.extensions?.code).toBe('forbidden');

    const created = await gql(platformToken, `mutation { createNodeCredential(name: "node-1") { credential { id prefix name } secret } }`);
    const { credential, secret } = created.data!.createNodeCredential;
    expect(secret).toMatch(/^infn_/);
    expect(secret.startsWith(credential.prefix)).toBe(true);
    const listed = await gql(platformToken, `{ nodeCredentials { id name prefix revokedAt } }`);
    expect(JSON.stringify(listed)).not.toContain(secret);
    expect(listed.data!.nodeCredentials).toContainEqual({ id: credential.id, name: 'node-1', prefix: credential.prefix, revokedAt: null });
    const row = await t.database.db.selectFrom('nodeCredentials').selectAll().where('id', '=', credential.id).executeTakeFirstOrThrow();
    expect(row.hash).not.toContain(secret.slice(12));
    const audit = await t.database.db.selectFrom('auditLog').select(['action', 'detail']).where('targetId', '=', credential.id).execute();
    expect(audit.map((a) => a.action)).toEqual(['node_credential.create']);
    expect(JSON.stringify(audit)).not.toContain(secret);
  });

  it('a revoked node credential is refused, and its open config stream is cut', async () => {
    const created = await gql(platformToken, `mutation { createNodeCredential(name: "node-2") { credential { id } secret } }`);
    const { credential, secret } = created.data!.createNodeCredential;
    expect((await postUsage([record()], secret)).status).toBe(200);

    const stream = await fetch(`${t.baseUrl}/internal/v1/config/stream`, { headers: { authorization: `Bearer ${secret}` } });
    expect(stream.status).toBe(200);
    const events = sseReader(stream.body!);
    expect((await events.next())?.event).toBe('snapshot');
    // The bootstrap credential's stream must survive the revoke of another credential.
    const bootstrap = await fetch(`${t.baseUrl}/internal/v1/config/stream`, { headers: { authorization: `Bearer ${NODE_TOKEN}` } });
    const bootstrapEvents = sseReader(bootstrap.body!);
    expect((await bootstrapEvents.next())?.event).toBe('snapshot');

    const revoked = await gql(platformToken, `mutation($id: ID!) { revokeNodeCredential(id: $id) { revokedAt } }`, { id: credential.id });
    expect(revoked.data!.revokeNodeCredential.revokedAt).not.toBeNull();
    await expect(events.next(5000)).rejects.toThrow('SSE stream ended'); // the server ended the stream

    const refused = await postUsage([record()], secret);
    expect(refused.status).toBe(401);
    expect(refused.body.error?.code).toBe('invalid_api_key');
    const again = await fetch(`${t.baseUrl}/internal/v1/config/snapshot`, { headers: { authorization: `Bearer ${secret}` } });
    expect(again.status).toBe(401);
    const audit = await t.database.db.selectFrom('auditLog').select('action').where('targetId', '=', credential.id).orderBy('id').execute();
    expect(audit.map((a) => a.action)).toEqual(['node_credential.create', 'node_credential.revoke']);

    // A tRPC caller without the platform role cannot revoke either.
    const trpc = await fetch(`${t.baseUrl}/trpc/nodeCredentials.revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenantToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: credential.id }),
    });
    expect(trpc.status).toBe(403);
    // The bootstrap stream was not cut: it still receives deltas.
    await createTenant(t.database.db, { slug: 'charlie', name: 'Charlie' });
    expect((await bootstrapEvents.next(10_000)).event).toBe('delta');
  });

  it('a revoke made on another control-plane replica cuts the stream at its next re-check', async () => {
    const created = await gql(platformToken, `mutation { createNodeCredential(name: "node-3") { credential { id } secret } }`);
    const { credential, secret } = created.data!.createNodeCredential;
    const stream = await fetch(`${t.baseUrl}/internal/v1/config/stream`, { headers: { authorization: `Bearer ${secret}` } });
    const events = sseReader(stream.body!);
    expect((await events.next())?.event).toBe('snapshot');
    // Written straight to the database: this process's revoke event never fires, as on another replica.
    await t.database.db.updateTable('nodeCredentials').set({ revokedAt: new Date() }).where('id', '=', credential.id).execute();
    await expect(events.next(15_000)).rejects.toThrow('SSE stream ended');
  });

  it('refuses a made-up infn_ credential', async () => {
    expect((await postUsage([record()], 'infn_0000000000000000000000000000000000000')).status).toBe(401);
  });
});
