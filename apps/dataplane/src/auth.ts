import { hash } from 'node:crypto';
import { ApiError } from '@infer/shared';
import type { ConfigStore } from './config/config-store.ts';
import type { ConfigView, ResolvedKey } from './config/config-view.ts';

const MISSING = new ApiError('missing_api_key', "You didn't provide an API key. Send it as 'Authorization: Bearer <API_KEY>'.");
const BAD_SCHEME = new ApiError('invalid_api_key', "The Authorization header must use the Bearer scheme: 'Authorization: Bearer <API_KEY>'.");
const INVALID = new ApiError('invalid_api_key', 'Incorrect or expired API key provided.');
const NOT_READY = new ApiError('service_unavailable', 'This node has no configuration yet. Try again shortly.');
const REFUSED = new ApiError(
  'service_unavailable',
  "This node's credential was refused by the control plane, so it cannot tell which API keys are still valid; it serves no requests until it is accepted again. Retry: another node may serve the request.",
);

/**
 * Keys already resolved, by token, per config snapshot: SHA-256 through node:crypto cost 2-3 µs of a request's
 * 100-150 (bench/RESULTS.md, seventh session). Only keys that resolved are kept (a stream of wrong tokens cannot
 * grow it), at most `TOKEN_CACHE_MAX` per snapshot, and a new snapshot (a key revoked, rotated or expired early)
 * starts an empty one; expiry is checked on every request. The tokens are in this process's memory only, as every
 * request's Authorization header already is; nothing of them is written anywhere.
 */
const byToken = new WeakMap<ConfigView, Map<string, ResolvedKey>>();
export const TOKEN_CACHE_MAX = 4096;

/** Resolves the bearer key of an Authorization header by hash lookup (O(1), no I/O). */
export function authenticate(view: ConfigView | null, authorization: string | undefined, now: number): ResolvedKey | ApiError {
  if (authorization === undefined || authorization.length === 0) return MISSING;
  const space = authorization.indexOf(' ');
  if (space !== 6 || authorization.slice(0, 6).toLowerCase() !== 'bearer') return BAD_SCHEME;
  const token = authorization.slice(7).trim();
  if (token.length === 0) return MISSING;
  if (view === null) return NOT_READY;
  let cache = byToken.get(view);
  let key = cache?.get(token);
  if (key === undefined) {
    // The digest of `hashSecret` (SHA-256, hex), by the one-shot API: no Hash object per request.
    key = view.keyByHash.get(hash('sha256', token, 'hex'));
    if (key === undefined) return INVALID;
    if (cache === undefined) byToken.set(view, (cache = new Map()));
    else if (cache.size >= TOKEN_CACHE_MAX) cache.clear();
    cache.set(token, key);
  }
  if (key.expiresAtMs <= now) return INVALID;
  return key;
}

/**
 * The caller's key on the store's current view. While the control plane refuses the node's credential, every request
 * is a 503 whatever its key: keys revoked since then would still pass on the frozen view.
 */
export function authenticateRequest(store: ConfigStore, authorization: string | undefined, now: number): ResolvedKey | ApiError {
  if (store.refusal !== null) return REFUSED;
  return authenticate(store.view, authorization, now);
}
