import { ApiError } from '@infer/shared';

/** Where a parsed body holds a key the JSON parser refuses (`__proto__`, or `constructor` with `prototype`), or null. */
function forbiddenKeyPath(value: unknown, path: string): string | null {
  if (typeof value !== 'object' || value === null) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = forbiddenKeyPath(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const here = path === '' ? key : `${path}.${key}`;
    if (key === '__proto__') return here;
    // JSON.parse makes `__proto__` an own property, so the walk sees it (and reads it) like any other key.
    const child = record[key];
    if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) return `${here}.prototype`;
    const found = forbiddenKeyPath(child, here);
    if (found !== null) return found;
  }
  return null;
}

/**
 * The error for a body Fastify's JSON parser refused. It refuses valid JSON holding a `__proto__` or
 * `constructor.prototype` key (prototype poisoning) with the same "not valid JSON" error as a syntax error;
 * such a body gets a 400 that names the key instead. Runs on refusals only (the depth check ran before, so
 * the walk's recursion is bounded).
 */
export function explainJsonError(err: Error, text: string): Error {
  if ((err as { code?: string }).code !== 'FST_ERR_CTP_INVALID_JSON_BODY') return err;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return err; // really not JSON
  }
  const path = forbiddenKeyPath(parsed, '');
  if (path === null) return err;
  const key = path.endsWith('.prototype') ? 'constructor.prototype' : '__proto__';
  return new ApiError('invalid_request', `The request body holds the key '${key}' (at '${path}'), which is not allowed: rename or remove it.`, path);
}
