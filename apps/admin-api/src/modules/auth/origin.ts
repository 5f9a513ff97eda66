/** The request headers an origin check reads (raw values; arrays take the first). */
export interface OriginHeaders {
  readonly origin?: string | string[];
  readonly referer?: string | string[];
  readonly host?: string | string[];
  readonly 'x-forwarded-host'?: string | string[];
}

const first = (v: string | string[] | undefined): string | undefined => {
  const s = Array.isArray(v) ? v[0] : v;
  const t = s?.split(',')[0]?.trim();
  return t ? t : undefined;
};

function originOf(value: string | undefined): URL | undefined {
  if (!value || value === 'null') return undefined;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}

/** Normalises configured console origins (`https://console.example.com`) for comparison. */
export function normaliseOrigins(list: readonly string[]): readonly string[] {
  return Object.freeze(list.map((o) => originOf(o)?.origin).filter((o): o is string => o !== undefined));
}

/**
 * CSRF defence for cookie-authenticated mutations (the Lucia check): the Origin header, or the
 * Referer's origin when there is none, must name this host (Host / X-Forwarded-Host) or one of the
 * allowed console origins. A request with neither header fails.
 */
export function isSameOrigin(headers: OriginHeaders, allowedOrigins: readonly string[] = []): boolean {
  const source = originOf(first(headers.origin)) ?? originOf(first(headers.referer));
  if (!source) return false;
  if (allowedOrigins.includes(source.origin)) return true;
  const host = first(headers['x-forwarded-host']) ?? first(headers.host);
  return host !== undefined && source.host.toLowerCase() === host.toLowerCase();
}

/** True when the request sent an Origin or Referer at all (browsers do on every POST). */
export const hasOriginHeader = (headers: OriginHeaders): boolean =>
  first(headers.origin) !== undefined || first(headers.referer) !== undefined;
