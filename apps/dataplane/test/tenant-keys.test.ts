import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '@infer/shared';
import { hashSecret } from '@infer/shared';
import { buildConfigView } from '../src/config/config-view.ts';
import { NAME, SECRET_A, SECRET_B, chatBody, deadUrl, errorOf, makeSnapshot, memorySink, post, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

const SECRET_ORPHAN = 'infk_test_orphan_key_000000000000000';

let sim: StartedSim;
let dp: StartedApp;
let base: ConfigSnapshot;
const sink = memorySink();

/** The helpers' snapshot plus a key whose tenant ('t-gone') is not in the snapshot. */
function withOrphanKey(s: ConfigSnapshot): ConfigSnapshot {
  return {
    ...s,
    keys: [
      ...s.keys,
      {
        id: 'k-orphan',
        tenantId: 't-gone',
        hash: hashSecret(SECRET_ORPHAN),
        prefix: SECRET_ORPHAN.slice(0, 12),
        expiresAt: null,
        rpmLimit: null,
        tpmLimit: null,
      },
    ],
  };
}

beforeAll(async () => {
  sim = await startSim();
  base = makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() });
  dp = await startDataplane(withOrphanKey(base), sink);
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

const SHARED = '/endpoints/v1/chat/completions';

describe('keys of tenants absent from the snapshot', () => {
  it('are left out of the view (built once per snapshot)', () => {
    const view = buildConfigView(withOrphanKey(base));
    expect(view.keyByHash.has(hashSecret(SECRET_ORPHAN))).toBe(false);
    expect(view.keyByHash.get(hashSecret(SECRET_A))).toMatchObject({ id: 'k-a', tenantId: 't-a', tenantSlug: 'acme' });
  });

  it('get 401 invalid_api_key on the chat and models routes, and write no usage record', async () => {
    const chat = await post(`${dp.url}${SHARED}`, chatBody({ model: NAME }), SECRET_ORPHAN, { 'x-request-id': 'orphan-1' });
    expect(chat.status).toBe(401);
    const unknown = await post(`${dp.url}${SHARED}`, chatBody({ model: NAME }), 'infk_never_issued_key_00000000000000');
    expect(unknown.status).toBe(401);
    // Exactly what an unknown key gets: nothing tells the caller that the key exists.
    expect(await errorOf(chat)).toEqual({ ...(await errorOf(unknown)), code: 'invalid_api_key' });
    const models = await fetch(`${dp.url}/endpoints/v1/models`, { headers: { authorization: `Bearer ${SECRET_ORPHAN}` } });
    expect(models.status).toBe(401);
    expect((await errorOf(models)).code).toBe('invalid_api_key');
    expect(sink.records.some((r) => r.keyId === 'k-orphan')).toBe(false);
    // Keys of present tenants still work.
    const ok = await post(`${dp.url}${SHARED}`, chatBody({ model: NAME }), SECRET_A);
    expect(ok.status).toBe(200);
    await ok.text();
  });

  it('stop authenticating when a new snapshot drops their tenant', async () => {
    const before = await post(`${dp.url}${SHARED}`, chatBody({ model: NAME }), SECRET_B);
    expect(before.status).toBe(200);
    await before.text();
    // Tenant 't-b' removed, its key 'k-b' left behind in the snapshot.
    dp.store.replace({ ...withOrphanKey(base), version: base.version + 1, tenants: base.tenants.filter((t) => t.id !== 't-b') });
    const after = await post(`${dp.url}${SHARED}`, chatBody({ model: NAME }), SECRET_B);
    expect(after.status).toBe(401);
    expect((await errorOf(after)).code).toBe('invalid_api_key');
    const a = await post(`${dp.url}${SHARED}`, chatBody({ model: NAME }), SECRET_A);
    expect(a.status).toBe(200);
    await a.text();
  });
});
