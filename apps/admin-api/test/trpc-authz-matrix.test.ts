import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import type { Db } from '../src/db.ts';
import { issueAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { createDeployment } from '../src/modules/deployments/deployment-store.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../src/modules/deployments/deployments-context.ts';
import { createExternalProvisioner } from '../src/modules/deployments/provisioners/external/external-provisioner.ts';
import { createApiKey } from '../src/modules/keys/keys.service.ts';
import { addMember, getMembership } from '../src/modules/tenants/tenants.service.ts';
import { ingestUsage } from '../src/modules/usage/usage.service.ts';
import { createContextInner } from '../src/trpc/context.ts';
import { createCallerFactory } from '../src/trpc/init.ts';
import { appRouter } from '../src/trpc/root.ts';
import { buildWorld, principalOf, PUBLIC_URLS, type PartyName, type World } from './trpc-fixtures.ts';

const callerFactory = createCallerFactory(appRouter);
type Caller = ReturnType<typeof callerFactory>;
type Outcome = 'ok' | TRPCError['code'];

const PARTIES: readonly PartyName[] = ['anonymous', 'memberA', 'ownerA', 'ownerB', 'admin', 'platformToken', 'tokenA'];

/** Expected outcome per party for a call on tenant A. */
function expectFor(memberA: Outcome, ownerA: Outcome = 'ok'): Record<PartyName, Outcome> {
  return {
    anonymous: 'UNAUTHORIZED',
    memberA,
    ownerA,
    ownerB: 'NOT_FOUND',
    admin: 'ok',
    platformToken: 'ok',
    tokenA: 'ok',
  };
}

interface Case<T> {
  readonly name: string;
  readonly expect: Record<PartyName, Outcome>;
  /** Builds what the call targets (fresh per party). */
  prepare(db: Db, w: World): Promise<T>;
  run(caller: Caller, w: World, arg: T): Promise<unknown>;
  /** Holds after a refused call: nothing of A changed. */
  unchanged?(db: Db, w: World, arg: T): Promise<void>;
}

let entrySeq = 0;
async function dedicatedEntry(db: Db): Promise<string> {
  const name = `matrix-model-${process.pid}-${++entrySeq}`;
  await createEntry(db, { name, provider: 'acme', offeredShared: false, offeredDedicated: true, published: true });
  return name;
}
const none = async (): Promise<null> => null;

const keyRevoked = async (db: Db, id: string): Promise<boolean> =>
  (await db.selectFrom('apiKeys').select('revokedAt').where('id', '=', id).executeTakeFirstOrThrow()).revokedAt !== null;

const cases: Case<any>[] = [
  { name: 'keys.list', expect: expectFor('ok'), prepare: none, run: (c, w) => c.keys.list({ tenantId: w.tenantA.id }) },
  {
    name: 'keys.create',
    expect: expectFor('ok'),
    prepare: none,
    run: (c, w) => c.keys.create({ tenantId: w.tenantA.id, name: 'matrix' }),
  } satisfies Case<null>,
  {
    name: "keys.revoke (the owner's key)",
    expect: expectFor('FORBIDDEN'),
    prepare: async (db, w) => (await createApiKey(db, { tenantId: w.tenantA.id, name: 'owner key', createdBy: w.parties.ownerA.userId })).key.id,
    run: (c, w, keyId) => c.keys.revoke({ tenantId: w.tenantA.id, keyId }),
    unchanged: async (db, _w, keyId) => expect(await keyRevoked(db, keyId)).toBe(false),
  } satisfies Case<string>,
  { name: 'tenants.get', expect: expectFor('ok'), prepare: none, run: (c, w) => c.tenants.get({ tenantId: w.tenantA.id }) },
  { name: 'tenants.members.list', expect: expectFor('ok'), prepare: none, run: (c, w) => c.tenants.members.list({ tenantId: w.tenantA.id }) },
  {
    name: 'tenants.members.add',
    expect: expectFor('FORBIDDEN'),
    prepare: async (db) => createUser(db, { email: `new-${process.pid}-${++entrySeq}@example.com`, password: 'long enough' }),
    run: (c, w, user) => c.tenants.members.add({ tenantId: w.tenantA.id, email: user.email, role: 'member' }),
    unchanged: async (db, w, user) => expect(await getMembership(db, w.tenantA.id, user.id)).toBeNull(),
  } satisfies Case<{ id: string; email: string }>,
  {
    name: 'tenants.members.remove',
    expect: expectFor('FORBIDDEN'),
    prepare: async (db, w) => {
      const user = await createUser(db, { email: `gone-${process.pid}-${++entrySeq}@example.com`, password: 'long enough' });
      await addMember(db, { tenantId: w.tenantA.id, userId: user.id, role: 'member' });
      return user.id;
    },
    run: (c, w, userId) => c.tenants.members.remove({ tenantId: w.tenantA.id, userId }),
    unchanged: async (db, w, userId) => expect(await getMembership(db, w.tenantA.id, userId)).not.toBeNull(),
  } satisfies Case<string>,
  { name: 'deployments.list', expect: expectFor('ok'), prepare: none, run: (c, w) => c.deployments.list({ tenantId: w.tenantA.id }) },
  {
    name: 'deployments.create',
    expect: expectFor('ok'),
    prepare: (db) => dedicatedEntry(db),
    run: (c, w, entryName) =>
      c.deployments.create({ tenantId: w.tenantA.id, entryName, provisioner: 'external', externalUrl: 'http://127.0.0.1:9', minReplicas: 0, maxReplicas: 1 }),
    unchanged: async (db, w) => {
      const rows = await db.selectFrom('deployments').select('id').where('tenantId', '=', w.tenantB.id).execute();
      expect(rows).toEqual([]);
    },
  } satisfies Case<string>,
  {
    name: 'deployments.delete',
    expect: expectFor('ok'),
    prepare: async (db, w) =>
      (
        await createDeployment(db, {
          tenantId: w.tenantA.id,
          entryName: await dedicatedEntry(db),
          minReplicas: 0,
          maxReplicas: 1,
          provisioner: 'external',
          externalUrl: 'http://127.0.0.1:9',
        })
      ).id,
    run: (c, w, deploymentId) => c.deployments.delete({ tenantId: w.tenantA.id, deploymentId }),
    unchanged: async (db, _w, id) => expect(await db.selectFrom('deployments').select('id').where('id', '=', id).executeTakeFirst()).toBeDefined(),
  } satisfies Case<string>,
  { name: 'usage.summary', expect: expectFor('ok'), prepare: none, run: (c, w) => c.usage.summary({ tenantId: w.tenantA.id }) },
  { name: 'audit.list (tenant)', expect: expectFor('FORBIDDEN'), prepare: none, run: (c, w) => c.audit.list({ tenantId: w.tenantA.id }) },
  { name: 'adminTokens.list (tenant)', expect: expectFor('FORBIDDEN'), prepare: none, run: (c, w) => c.adminTokens.list({ tenantId: w.tenantA.id }) },
  {
    name: 'adminTokens.create (tenant)',
    expect: expectFor('FORBIDDEN'),
    prepare: none,
    run: (c, w) => c.adminTokens.create({ name: 'matrix', tenantId: w.tenantA.id }),
  },
  {
    name: 'adminTokens.revoke (tenant)',
    expect: expectFor('FORBIDDEN'),
    prepare: async (db, w) => (await issueAdminToken(db, { name: 'victim', tenantId: w.tenantA.id })).token.id,
    run: (c, w, tokenId) => c.adminTokens.revoke({ tenantId: w.tenantA.id, tokenId }),
    unchanged: async (db, _w, id) =>
      expect((await db.selectFrom('adminTokens').select('revokedAt').where('id', '=', id).executeTakeFirstOrThrow()).revokedAt).toBeNull(),
  } satisfies Case<string>,
  {
    name: 'adminTokens.create (platform-wide)',
    expect: {
      anonymous: 'UNAUTHORIZED',
      memberA: 'FORBIDDEN',
      ownerA: 'FORBIDDEN',
      ownerB: 'FORBIDDEN',
      admin: 'ok',
      platformToken: 'ok',
      tokenA: 'FORBIDDEN',
    },
    prepare: none,
    run: (c) => c.adminTokens.create({ name: 'platform', tenantId: null }),
  },
  {
    name: 'audit.list (all)',
    expect: {
      anonymous: 'UNAUTHORIZED',
      memberA: 'FORBIDDEN',
      ownerA: 'FORBIDDEN',
      ownerB: 'FORBIDDEN',
      admin: 'ok',
      platformToken: 'ok',
      tokenA: 'FORBIDDEN',
    },
    prepare: none,
    run: (c) => c.audit.list(),
  },
  {
    name: 'tenants.setLimits',
    expect: {
      anonymous: 'UNAUTHORIZED',
      memberA: 'FORBIDDEN',
      ownerA: 'FORBIDDEN',
      ownerB: 'FORBIDDEN',
      admin: 'ok',
      platformToken: 'ok',
      tokenA: 'FORBIDDEN',
    },
    prepare: none,
    run: (c, w) => c.tenants.setLimits({ tenantId: w.tenantA.id, rpmLimit: 600, tpmLimit: null }),
  },
];

async function outcome(p: Promise<unknown>): Promise<Outcome> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    if (err instanceof TRPCError) return err.code;
    throw err;
  }
}

describe.each(testBackends())('tRPC authorisation matrix (%s)', (kind) => {
  let database: TestDatabase;
  let world: World;
  let deployments: DeploymentsContext;
  const callers = new Map<PartyName, Caller>();

  beforeAll(async () => {
    database = await createTestDb(kind);
    const { db } = database;
    world = await buildWorld(db);
    deployments = createDeploymentsContext({ db, provisioners: { external: createExternalProvisioner({ timeoutMs: 200 }) }, allowPrivateExternalUrls: true });
    for (const name of PARTIES) {
      const principal = await principalOf(db, world.parties[name]);
      callers.set(name, callerFactory(await createContextInner({ db, publicUrls: PUBLIC_URLS, deployments, principal })));
    }
    // Ingest bills the key's tenant only: the record needs a real key of tenant A.
    const usageKey = await createApiKey(db, { tenantId: world.tenantA.id, name: 'usage fixture' });
    await ingestUsage(db, [
      {
        requestId: `req-${kind}-1`,
        tenantId: world.tenantA.id,
        keyId: usageKey.key.id,
        endpointId: '',
        deploymentId: null,
        mode: 'shared',
        model: 'secret-model-of-a',
        promptTokens: 10,
        completionTokens: 5,
        estimated: false,
        status: 200,
        ttftMs: 10,
        latencyMs: 20,
        startedAt: new Date().toISOString(),
      },
    ]);
  }, 60_000);

  afterAll(async () => {
    await deployments?.reconciler.settled();
    await deployments?.reconciler.close();
    await database?.close();
  });

  describe.each(cases)('$name', (c) => {
    it.each(PARTIES)('as %s', async (party) => {
      const { db } = database;
      const arg = await c.prepare(db, world);
      const got = await outcome(c.run(callers.get(party)!, world, arg));
      expect(got).toBe(c.expect[party]);
      if (got !== 'ok') await c.unchanged?.(db, world, arg);
    });
  });

  it("lets B name A's ids only to get not-found, and A's things stay intact", async () => {
    const { db } = database;
    const b = callers.get('ownerB')!;
    const a = world.tenantA.id;
    const bId = world.tenantB.id;
    const keyOfA = await createApiKey(db, { tenantId: a, name: 'precious', createdBy: world.parties.ownerA.userId });
    const depOfA = await createDeployment(db, {
      tenantId: a,
      entryName: await dedicatedEntry(db),
      minReplicas: 0,
      maxReplicas: 1,
      provisioner: 'external',
      externalUrl: 'http://127.0.0.1:9',
    });
    const tokenOfA = await issueAdminToken(db, { name: 'a-automation', tenantId: a });

    expect(await outcome(b.keys.revoke({ tenantId: bId, keyId: keyOfA.key.id }))).toBe('NOT_FOUND');
    expect(await outcome(b.deployments.get({ tenantId: bId, deploymentId: depOfA.id }))).toBe('NOT_FOUND');
    expect(await outcome(b.deployments.delete({ tenantId: bId, deploymentId: depOfA.id }))).toBe('NOT_FOUND');
    expect(await outcome(b.deployments.stop({ tenantId: bId, deploymentId: depOfA.id }))).toBe('NOT_FOUND');
    expect(await outcome(b.deployments.scale({ tenantId: bId, deploymentId: depOfA.id, minReplicas: 0, maxReplicas: 2 }))).toBe('NOT_FOUND');
    expect(await outcome(b.tenants.members.remove({ tenantId: bId, userId: world.parties.ownerA.userId! }))).toBe('NOT_FOUND');
    expect(await outcome(b.adminTokens.revoke({ tenantId: bId, tokenId: tokenOfA.token.id }))).toBe('NOT_FOUND');
    expect(await outcome(b.adminTokens.revoke({ tokenId: tokenOfA.token.id }))).toBe('FORBIDDEN');

    // B's own reads never include A's rows.
    const text = JSON.stringify([
      await b.keys.list({ tenantId: bId }),
      await b.deployments.list({ tenantId: bId }),
      await b.tenants.members.list({ tenantId: bId }),
      await b.usage.summary({ tenantId: bId }),
      await b.audit.list({ tenantId: bId }),
      await b.adminTokens.list({ tenantId: bId }),
      await b.tenants.mine(),
    ]);
    for (const secretOfA of [keyOfA.key.id, depOfA.id, tokenOfA.token.id, world.parties.ownerA.userId!, a, 'secret-model-of-a']) {
      expect(text).not.toContain(secretOfA);
    }

    // A's things are untouched and usable.
    expect(await keyRevoked(db, keyOfA.key.id)).toBe(false);
    const ownerA = callers.get('ownerA')!;
    expect((await ownerA.deployments.get({ tenantId: a, deploymentId: depOfA.id })).state).toBe('pending');
    expect(await getMembership(db, a, world.parties.ownerA.userId!)).toMatchObject({ role: 'owner' });
    expect((await ownerA.adminTokens.list({ tenantId: a })).find((t) => t.id === tokenOfA.token.id)?.revokedAt).toBeNull();
    expect((await ownerA.usage.summary({ tenantId: a })).totals.requests).toBe(1);
  });

  it('lets members revoke their own keys, and never returns secrets or hashes in lists', async () => {
    const member = callers.get('memberA')!;
    const a = world.tenantA.id;
    const created = await member.keys.create({ tenantId: a, name: 'mine' });
    expect(created.secret).toMatch(/^infk_/);
    const listed = await member.keys.list({ tenantId: a });
    const text = JSON.stringify(listed);
    expect(text).not.toContain(created.secret);
    expect(Object.keys(listed[0]!)).not.toContain('hash');
    expect((await member.keys.revoke({ tenantId: a, keyId: created.key.id })).revokedAt).not.toBeNull();
  });

  it('writes audit rows naming who did what for key, token, membership and deployment changes', async () => {
    const { db } = database;
    const owner = callers.get('ownerA')!;
    const a = world.tenantA.id;
    const key = await owner.keys.create({ tenantId: a, name: 'audited' });
    await owner.keys.revoke({ tenantId: a, keyId: key.key.id });
    const token = await owner.adminTokens.create({ name: 'audited', tenantId: a });
    await owner.adminTokens.revoke({ tenantId: a, tokenId: token.token.id });
    const user = await createUser(db, { email: `audited-${kind}@example.com`, password: 'long enough' });
    // Members join by accepting an invitation (finding 9): the owner invites, the user accepts.
    const invited = await owner.tenants.members.add({ tenantId: a, email: user.email, role: 'member' });
    const invitee = callerFactory(
      await createContextInner({
        db,
        publicUrls: PUBLIC_URLS,
        principal: await principalOf(db, { cookie: `session=${(await createSession(db, user.id)).token}` }),
      }),
    );
    await invitee.tenants.invitations.accept({ invitationId: invited.invitationId });
    await owner.tenants.members.remove({ tenantId: a, userId: user.id });
    const dep = await owner.deployments.create({
      tenantId: a,
      entryName: await dedicatedEntry(db),
      provisioner: 'external',
      externalUrl: 'http://127.0.0.1:9',
      minReplicas: 0,
      maxReplicas: 1,
    });
    await owner.deployments.delete({ tenantId: a, deploymentId: dep.id });

    const log = await owner.audit.list({ tenantId: a, limit: 500 });
    const mine = log.filter((r) => r.actorUserId === world.parties.ownerA.userId);
    const actions = new Set(mine.map((r) => `${r.action}:${r.targetId}`));
    for (const expected of [
      `api_key.create:${key.key.id}`,
      `api_key.revoke:${key.key.id}`,
      `admin_token.create:${token.token.id}`,
      `admin_token.revoke:${token.token.id}`,
      `invitation.create:${invited.invitationId}`,
      `membership.remove:${user.id}`,
      `deployment.create:${dep.id}`,
      `deployment.delete:${dep.id}`,
    ]) {
      expect(actions).toContain(expected);
    }
    expect(mine.every((r) => r.actorEmail === world.parties.ownerA.email && r.createdAt instanceof Date)).toBe(true);
    expect(log.find((r) => r.action === 'membership.add' && r.targetId === user.id)?.actorUserId).toBe(user.id);
    expect(JSON.stringify(log)).not.toContain(key.secret);
    expect(JSON.stringify(log)).not.toContain(token.secret);
  });

  it('keeps the last owner of a tenant', async () => {
    const admin = callers.get('admin')!;
    const err = await outcome(admin.tenants.members.remove({ tenantId: world.tenantB.id, userId: world.parties.ownerB.userId! }));
    expect(err).toBe('CONFLICT');
  });
});
