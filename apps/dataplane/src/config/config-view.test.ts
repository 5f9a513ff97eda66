import { hashSecret } from '@infer/shared';
import type { ConfigSnapshot } from '@infer/shared';
import { describe, expect, it } from 'vitest';
import { buildConfigView, deploymentKey } from './config-view.ts';

const snapshot = (): ConfigSnapshot =>
  ({
    version: 3,
    tenants: [
      { id: 't-a', slug: 'acme', rpmLimit: 50, tpmLimit: null },
      { id: 't-b', slug: 'beta', rpmLimit: null, tpmLimit: 0 },
    ],
    keys: [
      { id: 'k-own', tenantId: 't-a', hash: hashSecret('own'), prefix: 'own', expiresAt: null, rpmLimit: 5, tpmLimit: 900 },
      { id: 'k-tenant', tenantId: 't-a', hash: hashSecret('tenant'), prefix: 'tenant', expiresAt: null, rpmLimit: null, tpmLimit: null },
      { id: 'k-none', tenantId: 't-b', hash: hashSecret('none'), prefix: 'none', expiresAt: null, rpmLimit: 0, tpmLimit: null },
    ],
    endpoints: [
      {
        id: 'e-1',
        name: 'm',
        provider: 'meta',
        contextLength: 4096,
        concurrency: 2,
        coldStartSeconds: null,
        offeredShared: true,
        offeredDedicated: true,
        published: true,
        priceInputPerM: 0,
        priceOutputPerM: 0,
        upstreams: [],
      },
      {
        id: 'e-2',
        name: 'hidden',
        provider: null,
        contextLength: null,
        concurrency: null,
        coldStartSeconds: null,
        offeredShared: false,
        offeredDedicated: true,
        published: false,
        priceInputPerM: 0,
        priceOutputPerM: 0,
        upstreams: [],
      },
    ],
    deployments: [
      { id: 'd-1', tenantId: 't-a', tenantSlug: 'acme', endpointId: 'e-1', endpointName: 'm', provider: 'meta', state: 'running', replicas: [] },
      { id: 'd-2', tenantId: 't-a', tenantSlug: 'acme', endpointId: 'e-2', endpointName: 'hidden', provider: null, state: 'running', replicas: [] },
    ],
  }) as unknown as ConfigSnapshot;

describe('ConfigView: the effective limits of keys and targets', () => {
  it("a key carries its own limits and its tenant's apart (0 and null mean unset)", () => {
    const v = buildConfigView(snapshot());
    expect(v.keyByHash.get(hashSecret('own'))!.limits).toEqual({ rpm: 5, tpm: 900 });
    expect(v.keyByHash.get(hashSecret('own'))!.tenantLimits).toEqual({ rpm: 50, tpm: null });
    expect(v.keyByHash.get(hashSecret('tenant'))!.limits).toEqual({ rpm: null, tpm: null });
    expect(v.keyByHash.get(hashSecret('tenant'))!.tenantLimits).toEqual({ rpm: 50, tpm: null });
    expect(v.keyByHash.get(hashSecret('none'))!.limits).toEqual({ rpm: null, tpm: null });
    expect(v.keyByHash.get(hashSecret('none'))!.tenantLimits).toEqual({ rpm: null, tpm: null });
  });

  it("targets carry their entry's context length and Concurrency; a deployment takes its endpoint's, published or not", () => {
    const v = buildConfigView(snapshot());
    expect(v.endpointByName.get('m')!.limits).toEqual({ contextLength: 4096, concurrency: 2 });
    expect(v.deploymentByTenantAndName.get(deploymentKey('acme', 'm'))!.limits).toEqual({ contextLength: 4096, concurrency: 2 });
    expect(v.deploymentByTenantAndName.get(deploymentKey('acme', 'hidden'))!.limits).toEqual({ contextLength: null, concurrency: null });
  });
});
