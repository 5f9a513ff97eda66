/**
 * The one playground key of this browser, per tenant: created once and reused by every tab, so tabs do
 * not mint a key each. Its secret stays in this browser (localStorage) and is dropped at logout or when
 * the key is found revoked.
 */
export interface PlaygroundKey {
  readonly id: string;
  readonly prefix: string;
  readonly secret: string;
}

const PREFIX = 'infer.playgroundKey.';

export function loadPlaygroundKey(tenantId: string | null): PlaygroundKey | null {
  if (!tenantId) return null;
  try {
    const v = JSON.parse(localStorage.getItem(PREFIX + tenantId) ?? 'null') as PlaygroundKey | null;
    return v && typeof v.secret === 'string' && typeof v.id === 'string' ? v : null;
  } catch {
    return null;
  }
}

export function savePlaygroundKey(tenantId: string, k: PlaygroundKey): void {
  localStorage.setItem(PREFIX + tenantId, JSON.stringify(k));
}

export function forgetPlaygroundKey(tenantId: string): void {
  localStorage.removeItem(PREFIX + tenantId);
}

/** At logout: every tenant's playground key leaves this browser. */
export function forgetAllPlaygroundKeys(): void {
  for (const k of Object.keys(localStorage)) if (k.startsWith(PREFIX)) localStorage.removeItem(k);
}
