import { curlSnippet, dedicatedModelName, endpointAddress, KEY_PLACEHOLDER, nodeSnippet, pythonSnippet, type PublicUrls } from '@infer/shared';

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
