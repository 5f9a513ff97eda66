import { curlSnippet, KEY_PLACEHOLDER, nodeSnippet, pythonSnippet } from '@infer/shared';
import type { PublicUrls } from '../../trpc/context.ts';

/** Spec 5.4: the key position shows this placeholder; secrets are shown once, never here. */
export { KEY_PLACEHOLDER };
/** The <tenant> segment shown to callers who cannot see a tenant-scoped URL. */
export const TENANT_PLACEHOLDER = '<tenant>';

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

const trimSlash = (s: string): string => s.replace(/\/+$/, '');

/** `{dataplane}/funccall/<tenant>/endpoints/<Name>/v1` (spec 4 #2, up to and including v1). */
export function dedicatedBaseUrl(urls: PublicUrls, tenantSlug: string, name: string): string {
  const seg = (s: string) => (s === TENANT_PLACEHOLDER ? s : encodeURIComponent(s));
  return `${trimSlash(urls.dataplaneUrl)}/funccall/${seg(tenantSlug)}/endpoints/${encodeURIComponent(name)}/v1`;
}

export function dedicatedModelName(name: string, provider: string | null): string {
  return provider && provider.trim() ? `${provider.trim()}/${name}` : name;
}

/** Builds the integration shape; `tenantSlug` null on dedicated gives the `<tenant>` placeholder URL. */
export function buildIntegration(
  urls: PublicUrls,
  entry: { name: string; provider: string | null },
  mode: IntegrationMode,
  tenantSlug: string | null = null,
): Integration {
  const apiBaseUrl =
    mode === 'shared' ? trimSlash(urls.sharedBaseUrl) : dedicatedBaseUrl(urls, tenantSlug ?? TENANT_PLACEHOLDER, entry.name);
  const modelName = mode === 'shared' ? entry.name : dedicatedModelName(entry.name, entry.provider);
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
