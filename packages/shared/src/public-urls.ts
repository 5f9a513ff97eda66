// How clients reach an endpoint (spec 1.6, 4): the control plane's integration views and the console
// build the same URLs and model names from here. No imports, so the browser bundle can take it whole.

/** Where the data plane is published. */
export interface PublicUrls {
  /** `{base_url}/endpoints/v1` of the shared surface. */
  readonly sharedBaseUrl: string;
  /** Origin of the data plane; dedicated URLs are built under it. */
  readonly dataplaneUrl: string;
}

export type Surface = 'shared' | 'dedicated';

/** The <tenant> segment shown to callers who cannot see a tenant-scoped URL; left unencoded. */
export const TENANT_PLACEHOLDER = '<tenant>';

/** The shared surface's base URL, up to and including `v1`. */
export const sharedBaseUrl = (urls: PublicUrls): string => trimTrailingSlashes(urls.sharedBaseUrl);

/** `{dataplane}/funccall/<tenant>/endpoints/<Name>/v1` (spec 4 #2, up to and including v1). */
export function dedicatedBaseUrl(urls: PublicUrls, tenantSlug: string, name: string): string {
  const tenant = tenantSlug === TENANT_PLACEHOLDER ? tenantSlug : encodeURIComponent(tenantSlug);
  return `${trimTrailingSlashes(urls.dataplaneUrl)}/funccall/${tenant}/endpoints/${encodeURIComponent(name)}/v1`;
}

/**
 * The one provider-prefixed `model` of dedicated mode (spec 2.1): "<Provider>/<Name>" with the catalog entry's
 * Provider as stored (e.g. `Meta/Llama-3.3-70B-Instruct`); the Name alone without a provider. The console, the
 * control plane's integration views, `pnpm start`'s demo.env and the data plane (which accepts this or the Name,
 * the provider in any case) all take it from here.
 */
export function dedicatedModelName(name: string, provider: string | null | undefined): string {
  return provider && provider.trim() ? `${provider.trim()}/${name}` : name;
}

/** API base URL and `model` value of one endpoint on one surface; dedicated without a tenant shows the placeholder. */
export function endpointAddress(
  urls: PublicUrls,
  entry: { readonly name: string; readonly provider: string | null | undefined },
  surface: Surface,
  tenantSlug: string | null = null,
): { apiBaseUrl: string; modelName: string } {
  if (surface === 'shared') return { apiBaseUrl: sharedBaseUrl(urls), modelName: entry.name };
  return {
    apiBaseUrl: dedicatedBaseUrl(urls, tenantSlug ?? TENANT_PLACEHOLDER, entry.name),
    modelName: dedicatedModelName(entry.name, entry.provider),
  };
}

/**
 * `s` without its trailing slashes, in linear time: `replace(/\/+$/, '')` retries the run of slashes from each
 * position, quadratic on a caller's URL of many slashes followed by anything else.
 */
export function trimTrailingSlashes(s: string): string {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 47) end--;
  return end === s.length ? s : s.slice(0, end);
}
