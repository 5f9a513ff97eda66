/**
 * Where to go after login: a path of this site, or '/'. Browsers read `\` as `/` and drop tabs and newlines, so
 * `/\evil.com` or `/\t/evil.com` would name another host (and `history.pushState` would throw on it): any of those,
 * protocol-relative (`//host`) and absolute URLs fall back to '/'.
 */
export function safeNext(next: string | null | undefined): string {
  if (!next || !next.startsWith('/') || next.startsWith('//')) return '/';
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/[\\\u0000-\u0020\u007f]/.test(next)) return '/';
  const base = 'http://console.invalid';
  try {
    return new URL(next, base).origin === base ? next : '/';
  } catch {
    return '/';
  }
}
