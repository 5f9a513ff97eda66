/** The request headers an origin check reads (raw values; arrays take the first). */
export interface OriginHeaders {
  readonly origin?: string | string[];
  readonly referer?: string | string[];
  readonly 'sec-fetch-site'?: string | string[];
}

const first = (v: string | string[] | undefined): string | undefined => {
  const s = Array.isArray(v) ? v[0] : v;
  const t = s?.trim();
  return t ? t : undefined;
};

function originOf(value: string | undefined): string | undefined {
  if (!value) return undefined;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Normalises configured console origins (`https://console.example.com`) for comparison. */
export function normaliseOrigins(list: readonly string[]): readonly string[] {
  return Object.freeze(list.map((o) => originOf(o)).filter((o): o is string => o !== undefined));
}

/**
 * Where a browser request comes from, as far as CSRF is concerned:
 * - 'same': its Origin (or, when no Origin was sent, its Referer's origin) is one of `trusted`;
 * - 'foreign': it names anything else, `Origin: null` (sandboxed frames, opaque redirects) included;
 * - 'absent': neither header (scripts, curl; browsers send Origin on every POST).
 * When an Origin header is present it alone decides: a same-origin Referer cannot vouch for it. With neither, a
 * browser's `Sec-Fetch-Site` still tells: `cross-site` or `same-site` (a link or form GET from another site, whose
 * page set no Referer, carries the Lax session cookie) is 'foreign'; `same-origin` and `none` (typed, bookmarked)
 * are not foreign, and nothing vouches for them: 'absent'.
 */
export function classifyOrigin(headers: OriginHeaders, trusted: readonly string[]): 'same' | 'foreign' | 'absent' {
  const origin = first(headers.origin);
  const source = origin !== undefined ? origin : first(headers.referer);
  if (source === undefined) {
    const site = first(headers['sec-fetch-site'])?.toLowerCase();
    return site === 'cross-site' || site === 'same-site' ? 'foreign' : 'absent';
  }
  const normalised = originOf(source);
  return normalised !== undefined && trusted.includes(normalised) ? 'same' : 'foreign';
}

/**
 * True when the request's Origin (or Referer) is one of `trusted` (the console origins and this
 * server's own public origin); kept for callers outside the request path.
 */
export function isSameOrigin(headers: OriginHeaders, trusted: readonly string[] = []): boolean {
  return classifyOrigin(headers, trusted) === 'same';
}
