// One home per rule (issue 9): the service functions themselves refuse the wrong caller, so no transport
// (tRPC, GraphQL, a future one) can forget a check. Each case calls the service directly, with no router
// or resolver in between, as another tenant's member, a member below the role needed, a non-admin, or
// anonymously.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { AUTOSCALING_LIMITS as SHARED_AUTOSCALING_LIMITS, MAX_REPLICAS as SHARED_MAX_REPLICAS } from '@infer/shared/deployment-limits';
import { ANONYMOUS, type Principal } from '../src/modules/access/principal.ts';
import { createAdminToken, issueAdminToken, listAdminTokens, revokeAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { addUpstream, adminListEntries, adminListUpstreams, browseEntries, createEntry } from '../src/modules/catalog/catalog.service.ts';
import { callerDeploymentsByEntry, endpointIntegration, type IntegrationCaller } from '../src/modules/catalog/integration.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../src/modules/deployments/deployments-context.ts';
import { deleteDeploymentRow } from '../src/modules/deployments/deployment-store.ts';
import {
  AUTOSCALING_LIMITS,
  createDeployment,
  deployEndpoint,
  getDeployment,
  getDeploymentGpuSeconds,
  getDeploymentsGpuSeconds,
  MAX_REPLICAS,
} from '../src/modules/deployments/deployments.service.ts';
import { openReplicaInterval } from '../src/modules/deployments/gpu-ledger.ts';
import { adminSetRuntimeConfig, viewRuntimeConfig } from '../src/modules/catalog/runtime-config.service.ts';
import { answerInvitation } from '../src/modules/tenants/invitations.service.ts';
import { callerRoleIn } from '../src/modules/tenants/tenants.service.ts';
import { summariseUsage } from '../src/modules/usage/usage.service.ts';
import { buildWorld, principalOf, PUBLIC_URLS, type PartyName, type World } from './trpc-fixtures.ts';

describe.each(testBackends())('services check the caller themselves (%s)', (kind) => {
  let database: TestDatabase;
  let deployments: DeploymentsContext;
  let w: World;
  const p = {} as Record<PartyName, Principal>;
  let sharedOnly: { id: string; name: string; provider: string | null; offeredShared: boolean; offeredDedicated: boolean };
  let dedicated: typeof sharedOnly;

  beforeAll(async () => {
    database = await createTestDb(kind);
    deployments = createDeploymentsContext({ db: database.db, provisioners: {} });
    w = await buildWorld(database.db);
    for (const name of Object.keys(w.parties) as PartyName[]) p[name] = await principalOf(database.db, w.parties[name]);
    sharedOnly = await createEntry(database.db, { name: 'Authz-Shared-8B', provider: 'acme', published: true });
    dedicated = await createEntry(database.db, { name: 'Authz-Dedicated-8B', provider: 'acme', offeredShared: false, offeredDedicated: true, published: true });
    await addUpstream(database.db, { entryId: sharedOnly.id, url: 'http://203.0.113.7:8000', kind: 'openai', servedModel: 'x' });
  }, 60_000);

  afterAll(async () => {
    await deployments?.reconciler.close();
    await database?.close();
  });

  describe('usage', () => {
    const range = { from: new Date(Date.now() - 86_400_000), to: new Date(Date.now() + 86_400_000) };

    it("refuses another tenant's owner as not found and the anonymous caller as unauthenticated", async () => {
      await expect(summariseUsage(database.db, p.ownerB, { tenantId: w.tenantA.id, ...range })).rejects.toMatchObject({ code: 'not_found' });
      await expect(summariseUsage(database.db, p.tokenA, { tenantId: w.tenantB.id, ...range })).rejects.toMatchObject({ code: 'not_found' });
      await expect(summariseUsage(database.db, ANONYMOUS, { tenantId: w.tenantA.id, ...range })).rejects.toMatchObject({ code: 'unauthenticated' });
    });

    it('answers members, and checks the range itself', async () => {
      const summary = await summariseUsage(database.db, p.memberA, { tenantId: w.tenantA.id });
      expect(summary.totals).toMatchObject({ requests: 0, gpuSeconds: 0, costUsd: 0 });
      await expect(summariseUsage(database.db, p.memberA, { tenantId: w.tenantA.id, from: range.to, to: range.from })).rejects.toMatchObject({
        code: 'invalid',
        param: 'from',
      });
    });
  });

  describe('admin tokens', () => {
    it('create: a member is forbidden, another tenant is not found, a platform token needs a platform admin', async () => {
      await expect(createAdminToken(database.db, p.memberA, { name: 'x', tenantId: w.tenantA.id })).rejects.toMatchObject({ code: 'forbidden' });
      await expect(createAdminToken(database.db, p.ownerB, { name: 'x', tenantId: w.tenantA.id })).rejects.toMatchObject({ code: 'not_found' });
      await expect(createAdminToken(database.db, p.ownerA, { name: 'x', tenantId: null })).rejects.toMatchObject({ code: 'forbidden' });
      await expect(createAdminToken(database.db, p.tokenA, { name: 'x', tenantId: null })).rejects.toMatchObject({ code: 'forbidden' });
      await expect(createAdminToken(database.db, ANONYMOUS, { name: 'x', tenantId: w.tenantA.id })).rejects.toMatchObject({ code: 'unauthenticated' });
      const rows = await database.db.selectFrom('adminTokens').select('name').where('name', '=', 'x').execute();
      expect(rows).toEqual([]);
    });

    it("create: an owner's token acts for the owner (the rights it may never exceed)", async () => {
      const created = await createAdminToken(database.db, p.ownerA, { name: 'owner-a-ci', tenantId: w.tenantA.id });
      expect(created.token).toMatchObject({ tenantId: w.tenantA.id, userId: w.parties.ownerA.userId });
    });

    it('list: every token needs a platform admin; a tenant list, its owner', async () => {
      await expect(listAdminTokens(database.db, p.ownerA)).rejects.toMatchObject({ code: 'forbidden' });
      await expect(listAdminTokens(database.db, p.tokenA)).rejects.toMatchObject({ code: 'forbidden' });
      await expect(listAdminTokens(database.db, p.memberA, { tenantId: w.tenantA.id })).rejects.toMatchObject({ code: 'forbidden' });
      await expect(listAdminTokens(database.db, p.ownerB, { tenantId: w.tenantA.id })).rejects.toMatchObject({ code: 'not_found' });
      const mine = await listAdminTokens(database.db, p.ownerA, { tenantId: w.tenantA.id });
      expect(mine.length).toBeGreaterThan(0);
      expect(mine.every((t) => t.tenantId === w.tenantA.id)).toBe(true);
    });

    it("revoke: another tenant's owner cannot name tenant A's token, by either scope; a member cannot either", async () => {
      const victim = await issueAdminToken(database.db, { name: 'victim', tenantId: w.tenantA.id });
      await expect(revokeAdminToken(database.db, p.ownerB, { tokenId: victim.token.id, tenantId: w.tenantA.id })).rejects.toMatchObject({ code: 'not_found' });
      await expect(revokeAdminToken(database.db, p.ownerB, { tokenId: victim.token.id, tenantId: w.tenantB.id })).rejects.toMatchObject({ code: 'not_found' });
      await expect(revokeAdminToken(database.db, p.ownerB, { tokenId: victim.token.id })).rejects.toMatchObject({ code: 'forbidden' });
      await expect(revokeAdminToken(database.db, p.memberA, { tokenId: victim.token.id, tenantId: w.tenantA.id })).rejects.toMatchObject({ code: 'forbidden' });
      const row = await database.db.selectFrom('adminTokens').select('revokedAt').where('id', '=', victim.token.id).executeTakeFirstOrThrow();
      expect(row.revokedAt).toBeNull();
      const revoked = await revokeAdminToken(database.db, p.ownerA, { tokenId: victim.token.id, tenantId: w.tenantA.id });
      expect(revoked.revokedAt).not.toBeNull();
    });
  });

  describe('catalog admin listings', () => {
    it('refuse tenant owners, tenant tokens and anonymous callers; answer platform admins', async () => {
      for (const who of [p.ownerA, p.memberA, p.tokenA]) {
        await expect(adminListEntries(database.db, who)).rejects.toMatchObject({ code: 'forbidden' });
        await expect(adminListUpstreams(database.db, who, sharedOnly.id)).rejects.toMatchObject({ code: 'forbidden' });
      }
      await expect(adminListEntries(database.db, ANONYMOUS)).rejects.toMatchObject({ code: 'unauthenticated' });
      const unpublished = await createEntry(database.db, { name: 'Authz-Hidden-8B', published: false });
      expect((await adminListEntries(database.db, p.platformToken)).map((e) => e.id)).toContain(unpublished.id);
      expect((await browseEntries(database.db)).map((e) => e.id)).not.toContain(unpublished.id);
      expect(await adminListUpstreams(database.db, p.admin, sharedOnly.id)).toMatchObject([{ url: 'http://203.0.113.7:8000', hasApiKey: false }]);
      await expect(adminListUpstreams(database.db, p.admin, 'not-a-uuid')).rejects.toMatchObject({ code: 'not_found' });
    });

    it('browsing bounds its filter values, naming the field', async () => {
      await expect(browseEntries(database.db, { search: 'x'.repeat(201) })).rejects.toMatchObject({ code: 'invalid', param: 'search' });
      await expect(adminListEntries(database.db, p.admin, { tag: 'x'.repeat(201) })).rejects.toMatchObject({ code: 'invalid', param: 'tag' });
    });
  });

  describe('endpoint integration', () => {
    const caller = (principal: Principal): IntegrationCaller => ({
      deployments,
      principal,
      urls: PUBLIC_URLS,
      ownDeployments: () => callerDeploymentsByEntry(deployments, principal),
    });

    it("a tenant URL needs membership of that tenant: another tenant's owner, its token and anonymous callers are refused", async () => {
      await expect(endpointIntegration(caller(p.ownerA), dedicated, 'dedicated', w.tenantB.slug)).rejects.toMatchObject({ code: 'not_found' });
      await expect(endpointIntegration(caller(p.tokenA), dedicated, 'dedicated', w.tenantB.slug)).rejects.toMatchObject({ code: 'not_found' });
      await expect(endpointIntegration(caller(p.ownerA), dedicated, 'dedicated', 'no-such-tenant')).rejects.toMatchObject({ code: 'not_found' });
      await expect(endpointIntegration(caller(ANONYMOUS), dedicated, 'dedicated', w.tenantA.slug)).rejects.toMatchObject({ code: 'unauthenticated' });
      const own = await endpointIntegration(caller(p.memberA), dedicated, 'dedicated', w.tenantA.slug);
      expect(own).toMatchObject({ mode: 'dedicated', tenantSlug: w.tenantA.slug, deploymentState: null });
      expect(own.apiBaseUrl).toContain(w.tenantA.slug);
    });

    it('a surface the entry is not offered on is refused naming mode', async () => {
      await expect(endpointIntegration(caller(p.memberA), dedicated, 'shared', null)).rejects.toMatchObject({ code: 'invalid', param: 'mode' });
      await expect(endpointIntegration(caller(p.memberA), sharedOnly, 'dedicated', w.tenantA.slug)).rejects.toMatchObject({ code: 'invalid', param: 'mode' });
    });
  });

  it("an entry's runtime configuration is shown to platform admins only", async () => {
    await adminSetRuntimeConfig(database.db, p.admin, dedicated.id, { image: 'vllm/vllm-openai:v0.11.0' });
    for (const who of [p.ownerA, p.tokenA, ANONYMOUS]) expect(await viewRuntimeConfig(database.db, who, dedicated.id)).toBeNull();
    expect(await viewRuntimeConfig(database.db, p.platformToken, dedicated.id)).toMatchObject({ image: 'vllm/vllm-openai:v0.11.0' });
    await expect(adminSetRuntimeConfig(database.db, p.ownerA, dedicated.id, null)).rejects.toMatchObject({ code: 'forbidden' });
  });

  it('invitations: the service bounds the token, naming it', async () => {
    await expect(answerInvitation(database.db, p.memberA, { token: 'x'.repeat(201) }, true)).rejects.toMatchObject({ code: 'invalid', param: 'token' });
  });

  it("tenants: the caller's role in another tenant is not found", () => {
    expect(() => callerRoleIn(p.ownerB, w.tenantA.id)).toThrow(expect.objectContaining({ code: 'not_found' }));
    expect(callerRoleIn(p.memberA, w.tenantA.id)).toBe('member');
    expect(callerRoleIn(p.tokenA, w.tenantA.id)).toBe('owner');
  });

  it("deployment GPU time: another tenant's deployment and an unknown id are not found (as getDeployment), a deleted one stays billable, the range is checked by the service", async () => {
    const own = await createDeployment(database.db, {
      tenantId: w.tenantA.id,
      entryName: dedicated.name,
      minReplicas: 0,
      maxReplicas: 1,
      provisioner: 'local',
    });
    const ref = { tenantId: w.tenantA.id, deploymentId: own.id };
    expect(await getDeploymentGpuSeconds(deployments, p.memberA, ref)).toEqual({ boot: 0, serving: 0, idle: 0, total: 0 });
    const notFound = { code: 'not_found', message: 'deployment not found' };
    await expect(getDeploymentGpuSeconds(deployments, p.ownerB, ref)).rejects.toMatchObject({ code: 'not_found' });
    // B's own tenant with A's deployment id, and ids that never were.
    await expect(getDeploymentGpuSeconds(deployments, p.ownerB, { tenantId: w.tenantB.id, deploymentId: own.id })).rejects.toMatchObject(notFound);
    await expect(getDeployment(deployments, p.ownerB, { tenantId: w.tenantB.id, deploymentId: own.id })).rejects.toMatchObject(notFound);
    for (const deploymentId of ['00000000-0000-0000-0000-000000000000', randomUUID(), 'not-a-uuid']) {
      await expect(getDeploymentGpuSeconds(deployments, p.memberA, { tenantId: w.tenantA.id, deploymentId }), deploymentId).rejects.toMatchObject(notFound);
    }
    const now = new Date();
    await expect(getDeploymentGpuSeconds(deployments, p.memberA, { ...ref, from: now, to: new Date(now.getTime() - 1000) })).rejects.toMatchObject({
      code: 'invalid',
      param: 'from',
    });
    // The ledger outlives the deployment: its GPU time stays readable by its tenant, and by nobody else.
    await openReplicaInterval(database.db, { replicaId: randomUUID(), deploymentId: own.id, tenantId: w.tenantA.id, entryId: dedicated.id, gpuCount: 1 });
    await deleteDeploymentRow(database.db, ref);
    expect((await getDeploymentGpuSeconds(deployments, p.memberA, ref)).total).toBeGreaterThanOrEqual(0);
    await expect(getDeploymentGpuSeconds(deployments, p.ownerB, { tenantId: w.tenantB.id, deploymentId: own.id })).rejects.toMatchObject(notFound);
    // The batched read (GraphQL lists): the tenant's role is checked, and another tenant's ledger answers nothing.
    await expect(getDeploymentsGpuSeconds(deployments, p.ownerB, { tenantId: w.tenantA.id, deploymentIds: [own.id] })).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(await getDeploymentsGpuSeconds(deployments, p.ownerB, { tenantId: w.tenantB.id, deploymentIds: [own.id] })).toEqual(new Map());
    // An id that is no uuid is no deployment (not a database error); a zero-length open interval has no GPU time yet.
    expect(await getDeploymentsGpuSeconds(deployments, p.memberA, { tenantId: w.tenantA.id, deploymentIds: [own.id, 'not-a-uuid'] })).toEqual(new Map());
  });

  describe('deployment limits', () => {
    it('the service enforces the one shared bound (the console imports the same module)', async () => {
      expect(MAX_REPLICAS).toBe(SHARED_MAX_REPLICAS);
      expect(AUTOSCALING_LIMITS).toBe(SHARED_AUTOSCALING_LIMITS);
      expect(SHARED_AUTOSCALING_LIMITS.scaleToZeroAfterSeconds).toMatchObject({ min: 10, default: 900 });
      expect(SHARED_AUTOSCALING_LIMITS.scaleDownDelaySeconds).toMatchObject({ min: 0, default: 60 });
      const input = { tenantId: w.tenantA.id, entryName: dedicated.name, provisioner: 'local' as const };
      await expect(deployEndpoint(deployments, p.memberA, { ...input, minReplicas: 0, maxReplicas: SHARED_MAX_REPLICAS + 1 })).rejects.toMatchObject({
        code: 'invalid',
        param: 'maxReplicas',
        message: expect.stringContaining(`1 to ${SHARED_MAX_REPLICAS}`),
      });
      await expect(
        deployEndpoint(deployments, p.memberA, {
          ...input,
          minReplicas: 0,
          maxReplicas: 1,
          autoscaling: { scaleToZeroAfterSeconds: SHARED_AUTOSCALING_LIMITS.scaleToZeroAfterSeconds.min - 1 },
        }),
      ).rejects.toMatchObject({ code: 'invalid', param: 'autoscaling.scaleToZeroAfterSeconds' });
      await expect(deployEndpoint(deployments, p.ownerB, { ...input, minReplicas: 0, maxReplicas: 1 })).rejects.toMatchObject({ code: 'not_found' });
    });
  });
});
