import { curlSnippet, dedicatedModelName, endpointAddress, KEY_PLACEHOLDER, nodeSnippet, pythonSnippet, type PublicUrls } from '@infer/shared';
import { ServiceError } from '../../errors.ts';
import type { Principal } from '../access/principal.ts';
import type { DeploymentsContext } from '../deployments/deployments-context.ts';
import { listDeployments } from '../deployments/deployments.service.ts';
import { getCallerTenant, listCallerTenants } from '../tenants/tenants.service.ts';

// The URL and model-name rules live in @infer/shared (the console builds the same ones).
export { dedicatedModelName };

export type IntegrationMode = 'shared' | 'dedicated';

/** The client values of spec 1.6 and ready-to-paste snippets for one endpoint on one surface. */
export interface Integration {
  mode: IntegrationMode;
  /** The tenant of a dedicated URL; null for shared or the placeholder URL. */
  tenantSlug: string | null;
  apiBaseUrl: string;
  /** Shared: the catalog Name. Dedicated: "<provider>/<Name>" (the Name when there is no provider). */
  modelName: string;
  apiKey: string;
  snippets: { curl: string; python: string; node: string };
}

/** Builds the integration shape (spec 5.4: the key position shows the placeholder, never a secret); `tenantSlug` null on dedicated gives the `<tenant>` placeholder URL. */
export function buildIntegration(
  urls: PublicUrls,
  entry: { name: string; provider: string | null },
  mode: IntegrationMode,
  tenantSlug: string | null = null,
): Integration {
  const { apiBaseUrl, modelName } = endpointAddress(urls, entry, mode, tenantSlug);
  return {
    mode,
    tenantSlug: mode === 'dedicated' ? tenantSlug : null,
    apiBaseUrl,
    modelName,
    apiKey: KEY_PLACEHOLDER,
    snippets: snippets(apiBaseUrl, modelName),
  };
}

function snippets(baseUrl: string, model: string): Integration['snippets'] {
  const input = { baseUrl, model, apiKey: null };
  return { curl: curlSnippet(input), python: pythonSnippet(input), node: nodeSnippet(input) };
}

/** An integration with the state of the tenant's deployment of the entry, when it has one. */
export type IntegrationView = Integration & { deploymentState: string | null };

/** One deployment of the caller's tenants, as the integration views show it. */
export interface CallerDeployment {
  readonly tenantSlug: string;
  readonly state: string;
}

/** The entry fields the integration rules read. */
export interface IntegrationEntry {
  readonly id: string;
  readonly name: string;
  readonly provider: string | null;
  readonly offeredShared: boolean;
  readonly offeredDedicated: boolean;
}

/** Who asks, and where their tenants' deployments come from (a transport may memoise `callerDeploymentsByEntry` per request). */
export interface IntegrationCaller {
  readonly deployments: DeploymentsContext;
  readonly principal: Principal;
  readonly urls: PublicUrls;
  readonly ownDeployments: () => Promise<ReadonlyMap<string, readonly CallerDeployment[]>>;
}

/** The deployments of the tenants the caller belongs to (memberships, or a tenant token's tenant), by entry id. */
export async function callerDeploymentsByEntry(deployments: DeploymentsContext, principal: Principal): Promise<Map<string, CallerDeployment[]>> {
  const byEntry = new Map<string, CallerDeployment[]>();
  for (const tenant of await listCallerTenants(deployments.db, principal)) {
    for (const d of await listDeployments(deployments, principal, tenant.id)) {
      const list = byEntry.get(d.entryId) ?? [];
      list.push({ tenantSlug: tenant.slug, state: d.state });
      byEntry.set(d.entryId, list);
    }
  }
  for (const list of byEntry.values()) list.sort((a, b) => a.tenantSlug.localeCompare(b.tenantSlug));
  return byEntry;
}

/**
 * How the caller calls one entry. No mode and no tenant: the dedicated URL of a tenant of theirs that
 * deployed it, else the shared base (the `<tenant>` placeholder when the entry is dedicated only). A
 * surface the entry is not offered on is refused naming `mode`; a tenant URL needs membership of that
 * tenant (any other slug, like an unknown one, is "not found").
 */
export async function endpointIntegration(
  c: IntegrationCaller,
  e: IntegrationEntry,
  mode: IntegrationMode | null,
  tenantSlug: string | null,
): Promise<IntegrationView> {
  const entry = { name: e.name, provider: e.provider || null };
  if (mode === 'shared' || (mode === null && tenantSlug === null)) {
    if (mode === 'shared' && !e.offeredShared) throw new ServiceError('invalid', `${e.name} is not offered on the shared surface`, 'mode');
    if (mode === null) {
      const own = (await c.ownDeployments()).get(e.id)?.[0];
      if (own) return { ...buildIntegration(c.urls, entry, 'dedicated', own.tenantSlug), deploymentState: own.state };
      if (!e.offeredShared) return { ...buildIntegration(c.urls, entry, 'dedicated'), deploymentState: null };
    }
    return { ...buildIntegration(c.urls, entry, 'shared'), deploymentState: null };
  }
  if (!e.offeredDedicated) throw new ServiceError('invalid', `${e.name} is offered on the shared surface only`, 'mode');
  if (tenantSlug !== null) {
    const tenant = await getCallerTenant(c.deployments.db, c.principal, { slug: tenantSlug });
    const deployment = (await listDeployments(c.deployments, c.principal, tenant.id)).find((d) => d.entryId === e.id);
    return { ...buildIntegration(c.urls, entry, 'dedicated', tenant.slug), deploymentState: deployment?.state ?? null };
  }
  const own = (await c.ownDeployments()).get(e.id)?.[0];
  return { ...buildIntegration(c.urls, entry, 'dedicated', own?.tenantSlug ?? null), deploymentState: own?.state ?? null };
}

/** Every way the caller can call the entry: the shared base (if offered) and each of their tenants' dedicated URLs. */
export async function endpointIntegrations(c: IntegrationCaller, e: IntegrationEntry): Promise<IntegrationView[]> {
  const entry = { name: e.name, provider: e.provider || null };
  const out: IntegrationView[] = [];
  if (e.offeredShared) out.push({ ...buildIntegration(c.urls, entry, 'shared'), deploymentState: null });
  const own = (await c.ownDeployments()).get(e.id) ?? [];
  for (const d of own) out.push({ ...buildIntegration(c.urls, entry, 'dedicated', d.tenantSlug), deploymentState: d.state });
  if (e.offeredDedicated && own.length === 0) out.push({ ...buildIntegration(c.urls, entry, 'dedicated'), deploymentState: null });
  return out;
}
