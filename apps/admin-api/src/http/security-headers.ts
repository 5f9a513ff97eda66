import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** SHA-256 CSP sources for the inline `<script>` and `<style>` blocks of an HTML page. */
function inlineHashes(html: string, tag: 'script' | 'style'): string[] {
  const out: string[] = [];
  const re = tag === 'script' ? /<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/gi : /<style[^>]*>([\s\S]*?)<\/style>/gi;
  for (const m of html.matchAll(re)) {
    const body = m[1] ?? '';
    if (body.trim() !== '') out.push(`'sha256-${createHash('sha256').update(body).digest('base64')}'`);
  }
  return out;
}

/**
 * Headers for every response of the control plane, the console's pages above all: a CSP that
 * allows only this origin's scripts and styles (plus the hashes of whatever inline blocks the
 * served index.html has: the Vite build has none, the fallback page one `<style>`), no framing
 * (clickjacking), no MIME sniffing, and no full URLs in Referer to other sites.
 * `connectOrigins`: where the console's own scripts may fetch (the data plane, for the playground).
 */
export function securityHeaders(opts: { webRoot?: string; connectOrigins: readonly string[] }): Readonly<Record<string, string>> {
  const index = opts.webRoot ? join(opts.webRoot, 'index.html') : undefined;
  const html = index && existsSync(index) ? readFileSync(index, 'utf8') : '';
  const connect = [...new Set(opts.connectOrigins)];
  const csp = [
    "default-src 'self'",
    `script-src ${["'self'", ...inlineHashes(html, 'script')].join(' ')}`,
    `style-src ${["'self'", ...inlineHashes(html, 'style')].join(' ')}`,
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src ${["'self'", ...connect].join(' ')}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  return Object.freeze({
    'content-security-policy': csp,
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'strict-origin-when-cross-origin',
  });
}
