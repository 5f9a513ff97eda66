// The whole request path across real processes' parts: control plane on a real database, config
// stream, data-plane node, runtime simulator, usage ingest.
import { afterEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { testBackends } from '@infer/db/testing';
import { addMember, createApiKey, createUser, revokeApiKey } from '@infer/admin-api';
import { chat, NODE_TOKEN, startPlatform, waitFor, type Platform } from './platform-helpers.ts';

describe.each(testBackends())('platform on %s', (kind) => {
  let p: Platform | undefined;
  afterEach(async () => {
    await p?.close();
    p = undefined;
  });

  it('a revoked key is refused by a running data-plane node within one second', async () => {
    p = await startPlatform(kind);
    expect((await chat(p, p.secret)).status).toBe(200);
    const platform = p;
    await revokeApiKey(platform.database.db, { tenantId: platform.tenantId, keyId: platform.keyId });
    const { value: status, elapsedMs } = await waitFor(async () => {
      const res = await chat(platform, platform.secret);
      await res.arrayBuffer();
      return res.status === 401 ? res.status : undefined;
    }, 3000);
    expect(status).toBe(401);
    expect(elapsedMs).toBeLessThan(1000);
  });

  it('a key created through tRPC works on the data plane and, revoked through tRPC, stops within a second', async () => {
    p = await startPlatform(kind);
    const platform = p;
    const user = await createUser(platform.database.db, { email: 'dev@acme.test', password: 'correct horse battery' });
    await addMember(platform.database.db, { tenantId: platform.tenantId, userId: user.id, role: 'member' });
    const consoleUrl = `http://127.0.0.1:${platform.adminPort}`;
    const trpc = async (path: string, body: unknown, cookie = ''): Promise<Response> =>
      fetch(`${consoleUrl}/trpc/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: consoleUrl, ...(cookie ? { cookie } : {}) },
        body: JSON.stringify(body),
      });
    const login = await trpc('auth.login', { email: 'dev@acme.test', password: 'correct horse battery' });
    expect(login.status).toBe(200);
    const cookie = login.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const created = await (await trpc('keys.create', { tenantId: platform.tenantId, name: 'from the console' }, cookie)).json();
    const secret: string = created.result.data.secret;
    const keyId: string = created.result.data.key.id;
    expect(secret).toMatch(/^infk_/);

    const { value: ok } = await waitFor(async () => {
      const res = await chat(platform, secret);
      await res.arrayBuffer();
      return res.status === 200 ? res.status : undefined;
    }, 3000);
    expect(ok).toBe(200);

    const revoked = await trpc('keys.revoke', { tenantId: platform.tenantId, keyId }, cookie);
    expect(revoked.status).toBe(200);
    const { elapsedMs } = await waitFor(async () => {
      const res = await chat(platform, secret);
      await res.arrayBuffer();
      return res.status === 401;
    }, 3000);
    expect(elapsedMs).toBeLessThan(1000);
  });

  it('keeps serving its last snapshot while the control plane is stopped, and catches up when it returns', async () => {
    p = await startPlatform(kind);
    const platform = p;
    await platform.stopAdmin();
    // Served from the in-memory snapshot: no control plane, no database on the request path.
    for (let i = 0; i < 3; i++) {
      const res = await chat(platform, platform.secret);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // Changes made while the control plane is away reach the node once it is back.
    const fresh = await createApiKey(platform.database.db, { tenantId: platform.tenantId, name: 'made while away' });
    await revokeApiKey(platform.database.db, { tenantId: platform.tenantId, keyId: platform.keyId });
    expect((await chat(platform, fresh.secret)).status).toBe(401);
    await platform.startAdmin();
    await waitFor(async () => {
      const [a, b] = await Promise.all([chat(platform, fresh.secret), chat(platform, platform.secret)]);
      await Promise.all([a.arrayBuffer(), b.arrayBuffer()]);
      return a.status === 200 && b.status === 401;
    }, 5000);
  });

  it('meters each request once, with the runtime token counts, and the ingest is idempotent', async () => {
    p = await startPlatform(kind);
    const platform = p;
    const openai = new OpenAI({ baseURL: `${platform.dataplaneUrl}/endpoints/v1`, apiKey: platform.secret });
    const reply = await openai.chat.completions.create({ model: 'Model-One', messages: [{ role: 'user', content: 'count me' }], max_tokens: 7 });
    const stream = await openai.chat.completions.create({
      model: 'Model-One',
      messages: [{ role: 'user', content: 'stream me' }],
      max_tokens: 5,
      stream: true,
    });
    for await (const _ of stream) {
      /* drain */
    }
    const { value: rows } = await waitFor(async () => {
      const r = await platform.database.db.selectFrom('usageRecords').select(['requestId', 'promptTokens', 'completionTokens', 'costUsd', 'mode']).execute();
      return r.length >= 2 ? r : undefined;
    }, 5000);
    expect(rows).toHaveLength(2);
    expect(rows.map((r) => r.completionTokens).sort()).toEqual([5, 7]);
    const json = rows.find((r) => r.completionTokens === 7)!;
    expect(json.promptTokens).toBe(reply.usage!.prompt_tokens);
    expect(json.costUsd).toBeCloseTo((json.promptTokens * 1 + 7 * 2) / 1e6, 12);

    // A node retrying a batch it already sent must not bill twice.
    const record = {
      requestId: 'retry-me',
      tenantId: platform.tenantId,
      keyId: platform.keyId,
      endpointId: 'Model-One',
      deploymentId: null,
      mode: 'shared',
      model: 'Model-One',
      promptTokens: 3,
      completionTokens: 4,
      estimated: false,
      status: 200,
      ttftMs: 1,
      latencyMs: 2,
      startedAt: new Date().toISOString(),
    };
    const post = () =>
      fetch(`http://127.0.0.1:${platform.adminPort}/internal/v1/usage`, {
        method: 'POST',
        headers: { authorization: `Bearer ${NODE_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ records: [record] }),
      });
    const first = await (await post()).json();
    const second = await (await post()).json();
    expect(first).toMatchObject({ accepted: 1, duplicates: 0 });
    expect(second).toMatchObject({ accepted: 0, duplicates: 1 });
    const stored = await platform.database.db.selectFrom('usageRecords').select('requestId').where('requestId', '=', 'retry-me').execute();
    expect(stored).toHaveLength(1);
  });

  it('a graceful data-plane shutdown flushes pending usage', async () => {
    p = await startPlatform(kind, { usageFlushMs: 60_000 });
    const platform = p;
    for (let i = 0; i < 3; i++) await (await chat(platform, platform.secret)).arrayBuffer();
    expect(platform.reporter.pending()).toBe(3);
    const before = await platform.database.db.selectFrom('usageRecords').select('requestId').execute();
    expect(before).toHaveLength(0);
    await platform.dataplane.close();
    await platform.reporter.close();
    const after = await platform.database.db.selectFrom('usageRecords').select('requestId').execute();
    expect(after).toHaveLength(3);
  });
});
