// The Kubernetes provisioner's API surfaces over real HTTP: which provisioners exist (GraphQL and
// tRPC), the catalog entries' runtimeConfig (platform admins only), and a KUBERNETES deployment made
// and removed through GraphQL by a tenant's admin token, against the fake API server.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp } from '../src/app.ts';
import { issueAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createEntry, setPublished } from '../src/modules/catalog/catalog.service.ts';
import { createKubernetesLookup } from '../src/modules/deployments/provisioners/kubernetes/kubernetes-lookup.ts';
import { createKubernetesProvisioner } from '../src/modules/deployments/provisioners/kubernetes/kubernetes-provisioner.ts';
import { objectName } from '../src/modules/deployments/provisioners/kubernetes/manifests.ts';
import { createExternalProvisioner } from '../src/modules/deployments/provisioners/external/external-provisioner.ts';
import { createTenant } from '../src/modules/tenants/tenants.service.ts';
import { runtimeContainer, startFakeCluster, until, type FakeCluster, type Tree } from './k8s-fake/fake-cluster.ts';

const NS = 'inference';

describe('Kubernetes provisioner API surfaces', () => {
  let database: TestDatabase;
  let cluster: FakeCluster;
  let app: FastifyInstance;
  let baseUrl: string;
  let platform: string;
  let tenantToken: string;
  let tenantId: string;
  let entryId: string;

  const gql = async (token: string | null, query: string, variables?: Record<string, unknown>) => {
    const res = await fetch(`${baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    return (await res.json()) as { data?: Tree; errors?: { message: string; extensions?: { code?: string; param?: string } }[] };
  };

  beforeAll(async () => {
    database = await createTestDb('pglite');
    cluster = await startFakeCluster({ namespaces: [NS] });
    const kubernetes = createKubernetesProvisioner({
      kubeConfig: cluster.kubeConfig(),
      namespace: NS,
      watchRetryMs: 20,
      lookup: createKubernetesLookup(database.db),
      defaults: { vllmImage: 'vllm/vllm-openai:latest', sglangImage: 's', tgiImage: 't', drainSeconds: 5 },
    });
    app = await buildAdminApp({
      db: database.db,
      dbKind: database.kind,
      nodeToken: 'node-token-0123456789abcdef',
      publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
      provisioners: { external: createExternalProvisioner(), kubernetes },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const tenant = await createTenant(database.db, { slug: 'kube', name: 'Kube' });
    tenantId = tenant.id;
    const entry = await createEntry(database.db, { name: 'acme/Qwen-32B', provider: 'acme', gpuCount: 4, coldStartSeconds: 20, offeredDedicated: true });
    await setPublished(database.db, entry.id, true);
    entryId = entry.id;
    platform = (await issueAdminToken(database.db, { name: 'ops', tenantId: null })).secret;
    tenantToken = (await issueAdminToken(database.db, { name: 'kube-ci', tenantId })).secret;
  });
  afterAll(async () => {
    await app?.close();
    await cluster?.close();
    await database?.close();
  });

  it('says which provisioners exist, on GraphQL and tRPC, to authenticated callers', async () => {
    expect((await gql(tenantToken, '{ provisioners }')).data?.provisioners).toEqual(['EXTERNAL', 'KUBERNETES']);
    expect((await gql(null, '{ provisioners }')).errors?.[0]?.extensions?.code).toBe('unauthenticated');
    const res = await fetch(`${baseUrl}/trpc/deployments.provisioners`, { headers: { authorization: `Bearer ${tenantToken}` } });
    expect(((await res.json()) as { result: { data: unknown } }).result.data).toEqual(['external', 'kubernetes']);
  });

  it('runtimeConfig: platform admins set and read it; tenants neither set nor see it; bad input names the field', async () => {
    const set = `mutation($id: ID!, $c: String) { setCatalogEntryRuntimeConfig(id: $id, runtimeConfig: $c) { name runtimeConfig } }`;
    const denied = await gql(tenantToken, set, { id: entryId, c: '{"runtime":"sglang"}' });
    expect(denied.errors?.[0]?.extensions?.code).toBe('forbidden');
    const bad = await gql(platform, set, { id: entryId, c: '{"runtime":"llamafile"}' });
    expect(bad.errors?.[0]?.message).toMatch(/^runtimeConfig\.runtime: /);
    const ok = await gql(platform, set, {
      id: entryId,
      c: JSON.stringify({ runtime: 'sglang', image: 'lmsysorg/sglang:v0.5.2', extraArgs: ['--mem-fraction-static', '0.85'] }),
    });
    expect(ok.errors).toBeUndefined();
    expect(JSON.parse(ok.data?.setCatalogEntryRuntimeConfig.runtimeConfig)).toEqual({
      runtime: 'sglang',
      image: 'lmsysorg/sglang:v0.5.2',
      extraArgs: ['--mem-fraction-static', '0.85'],
    });
    const read = `{ endpoint(name: "acme/Qwen-32B") { runtimeConfig } }`;
    expect((await gql(tenantToken, read)).data?.endpoint.runtimeConfig).toBeNull();
    expect((await gql(null, read)).data?.endpoint.runtimeConfig).toBeNull();
    expect(JSON.parse((await gql(platform, read)).data?.endpoint.runtimeConfig)).toMatchObject({ runtime: 'sglang' });
  });

  it('a tenant deploys on KUBERNETES through GraphQL and deleting it removes its Deployment and Service', async () => {
    const deploy = await gql(
      tenantToken,
      `mutation($t: ID!) { deployEndpoint(tenantId: $t, endpointName: "acme/Qwen-32B", provisioner: KUBERNETES, minReplicas: 1, maxReplicas: 1) { id provisioner state } }`,
      { t: tenantId },
    );
    expect(deploy.errors).toBeUndefined();
    const id = deploy.data?.deployEndpoint.id as string;
    expect(deploy.data?.deployEndpoint.provisioner).toBe('kubernetes');
    const state = async () =>
      (await gql(tenantToken, `query($t: ID!, $id: ID!) { tenant(id: $t) { deployment(id: $id) { state readyReplicas } } }`, { t: tenantId, id })).data?.tenant
        ?.deployment;
    await until(async () => (await state())?.state === 'RUNNING', 20_000, 'RUNNING');
    expect((await state())?.readyReplicas).toBe(1);
    const c = runtimeContainer(cluster.api.get('deployments', NS, objectName(id)));
    expect(c.image).toBe('lmsysorg/sglang:v0.5.2');
    expect(c.command).toEqual(['python3', '-m', 'sglang.launch_server']);
    expect(c.args).toEqual([
      '--model-path',
      'acme/Qwen-32B',
      '--served-model-name',
      'acme/Qwen-32B',
      '--tp',
      '4',
      '--host',
      '0.0.0.0',
      '--port',
      '8000',
      '--mem-fraction-static',
      '0.85',
    ]);
    expect(c.resources.limits['nvidia.com/gpu']).toBe('4');

    const del = await gql(tenantToken, `mutation($id: ID!, $t: ID!) { deleteDeployment(id: $id, tenantId: $t) }`, { id, t: tenantId });
    expect(del.errors).toBeUndefined();
    await until(() => !cluster.api.get('deployments', NS, objectName(id)) && !cluster.api.get('services', NS, objectName(id)), 10_000, 'objects deleted');
  });
});
