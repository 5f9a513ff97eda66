// Finding 6 (issue 9), the shared token switched off: a control plane restarted without NODE_TOKEN accepts
// only per-node `infn_…` credentials on /internal/v1/*. Real processes on a private PostgreSQL: the
// control plane (apps/admin-api/src/server.ts), runtime-sim and data-plane nodes. A node that served on
// the shared token gets 401 on the config feed and on usage ingest once it is unset (it can bill no
// tenant and fetch no upstream key); a node with its own credential, issued over GraphQL, serves and
// bills end to end.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest, type Database } from '@infer/db';
import { addUpstream, issueAdminToken, createApiKey, createEntry, createTenant } from '@infer/admin-api';
import { freePort, startNode, waitReady, type Child } from '../bench/processes.ts';
import { startPrivatePostgres, type PrivateService } from './fault/private-services.ts';

const OLD_SHARED_TOKEN = 'the-old-shared-node-token-0123456789';
const MODEL = 'Model-One';
const root = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, deadlineMs: number, stepMs = 25): Promise<T> {
  const start = performance.now();
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== false) return value;
    if (performance.now() - start > deadlineMs) throw new Error(`${what}: not within ${deadlineMs} ms`);
    await sleep(stepMs);
  }
}

describe('control plane without NODE_TOKEN (private PostgreSQL, real processes)', { timeout: 60_000 }, () => {
  let pg: PrivateService;
  let database: Database;
  let dir: string;
  let adminPort: number;
  let adminUrl: string;
  let controlPlane: Child;
  let tenantId: string;
  let keyId: string;
  let keySecret: string;
  let platformToken: string;
  const children: Child[] = [];

  const startDataplane = async (name: string, nodeToken: string): Promise<{ child: Child; url: string }> => {
    const port = await freePort();
    const child = startNode(name, root('apps/dataplane/src/server.ts'), [], {
      HOST: '127.0.0.1',
      PORT: String(port),
      CONTROL_PLANE_URL: adminUrl,
      NODE_TOKEN: nodeToken,
      USAGE_SPOOL_DIR: join(dir, `${name}-usage`),
      USAGE_FLUSH_MS: '100',
      METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
      ALLOWED_PRIVATE_CIDRS: '127.0.0.0/8',
    });
    children.push(child);
    return { child, url: `http://127.0.0.1:${port}` };
  };
  const usageRecord = (requestId: string) => ({
    requestId,
    tenantId,
    keyId,
    endpointId: null,
    deploymentId: null,
    mode: 'shared',
    model: MODEL,
    promptTokens: 10,
    completionTokens: 20,
    estimated: false,
    status: 200,
    ttftMs: 5,
    latencyMs: 9,
    startedAt: new Date().toISOString(),
  });
  const startControlPlane = async (nodeToken: string): Promise<void> => {
    controlPlane = startNode('admin-api', root('apps/admin-api/src/server.ts'), [], {
      DATABASE_URL: pg.url,
      NODE_TOKEN: nodeToken, // '': switched off, per-node credentials only
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      LOG_LEVEL: 'warn',
      DATA_DIR: join(dir, 'admin'),
    });
    children.push(controlPlane);
    await waitReady(controlPlane, `${adminUrl}/readyz`, 30_000);
  };
  const chat = async (nodeUrl: string): Promise<Response> => {
    const res = await fetch(`${nodeUrl}/endpoints/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keySecret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 }),
    });
    await res.arrayBuffer();
    return res;
  };
  const billed = async (requestId: string) =>
    database.db.selectFrom('usageRecords').select(['requestId', 'tenantId', 'keyId']).where('requestId', '=', requestId).execute();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'infer-node-cred-'));
    pg = await startPrivatePostgres();
    database = await createDb({ databaseUrl: pg.url, poolMax: 3 });
    await migrateToLatest(database.db);
    const simPort = await freePort();
    const sim = startNode('runtime-sim', root('packages/runtime-sim/src/cli.ts'), [
      '--port',
      String(simPort),
      '--host',
      '127.0.0.1',
      '--model',
      'org/served-model',
      '--ttft-ms',
      '0',
      '--itl-ms',
      '0',
    ]);
    children.push(sim);
    tenantId = (await createTenant(database.db, { slug: 'nodecred', name: 'Node Cred' })).id;
    const entry = await createEntry(database.db, {
      name: MODEL,
      provider: 'org',
      offeredShared: true,
      offeredDedicated: false,
      published: true,
      contextLength: 8192,
      priceInputPerM: 1,
      priceOutputPerM: 2,
    });
    await addUpstream(database.db, { entryId: entry.id, url: `http://127.0.0.1:${simPort}`, kind: 'sim', servedModel: 'org/served-model' });
    const key = await createApiKey(database.db, { tenantId, name: 'k' });
    keyId = key.key.id;
    keySecret = key.secret;
    platformToken = (await issueAdminToken(database.db, { name: 'infra', tenantId: null })).secret;

    adminPort = await freePort();
    adminUrl = `http://127.0.0.1:${adminPort}`;
    await waitReady(sim, `http://127.0.0.1:${simPort}/health`);
    await startControlPlane(OLD_SHARED_TOKEN);
  });

  afterAll(async () => {
    for (const c of children) if (!c.exited()) c.proc.kill('SIGKILL');
    await database?.close();
    await pg?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a node on the shared token is refused once NODE_TOKEN is unset: no config feed, no upstream keys, no usage billed', async () => {
    const node = await startDataplane('shared-token-node', OLD_SHARED_TOKEN);
    await waitReady(node.child, `${node.url}/readyz`, 30_000);
    const before = await chat(node.url);
    expect(before.status).toBe(200);
    const beforeId = before.headers.get('x-request-id')!;
    await until('billed while the shared token is accepted', async () => (await billed(beforeId)).length === 1, 20_000, 50);

    // The operator switches the shared token off.
    const exited = new Promise((r) => controlPlane.proc.once('exit', r));
    controlPlane.proc.kill('SIGTERM');
    await exited;
    await startControlPlane('');

    const auth = { authorization: `Bearer ${OLD_SHARED_TOKEN}` };
    for (const path of ['/internal/v1/config/snapshot', '/internal/v1/config/stream']) {
      const res = await fetch(`${adminUrl}${path}`, { headers: auth });
      expect(res.status, path).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    }
    const forgedId = `forged-${Date.now()}`;
    const usage = await fetch(`${adminUrl}/internal/v1/usage`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ records: [usageRecord(forgedId)] }),
    });
    expect(usage.status).toBe(401);
    expect(await billed(forgedId)).toEqual([]);

    // The node itself: its config stream reconnect is refused, and it fails closed rather than serve keys it can no
    // longer hear revocations of (and bill nowhere).
    await until(
      'the node reports its credential refused',
      async () => node.child.output().includes("the control plane refused this node's credential"),
      20_000,
    );
    const after = await chat(node.url);
    expect(after.status).toBe(503);
    expect(await billed(after.headers.get('x-request-id')!)).toEqual([]);
    expect((await fetch(`${node.url}/readyz`)).status).toBe(503);
    node.child.proc.kill('SIGKILL');
  });

  it('serves and bills end to end with a per-node credential issued over GraphQL', async () => {
    const res = await fetch(`${adminUrl}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${platformToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'mutation { createNodeCredential(name: "node-a") { credential { id } secret } }' }),
    });
    const body = (await res.json()) as { data?: { createNodeCredential: { credential: { id: string }; secret: string } } };
    const secret = body.data!.createNodeCredential.secret;
    expect(secret.startsWith('infn_')).toBe(true);

    const node = await startDataplane('credential-node', secret);
    await waitReady(node.child, `${node.url}/readyz`, 30_000); // snapshot from the config stream
    const res2 = await chat(node.url);
    expect(res2.status).toBe(200);
    const requestId = res2.headers.get('x-request-id')!;
    const rows = await until(
      'the request billed through the node credential',
      async () => {
        const r = await billed(requestId);
        return r.length > 0 ? r : undefined;
      },
      20_000,
      50,
    );
    expect(rows).toEqual([{ requestId, tenantId, keyId }]);
    const cred = await database.db
      .selectFrom('nodeCredentials')
      .selectAll()
      .where('id', '=', body.data!.createNodeCredential.credential.id)
      .executeTakeFirstOrThrow();
    console.log(`per-node credential ${cred.prefix}…: config stream and usage ingest accepted; shared token refused with 401`);
  });
});
