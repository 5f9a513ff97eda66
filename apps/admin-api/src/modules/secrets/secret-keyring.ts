// The control plane's keyring for secrets at rest (upstream provider API keys). The first key seals;
// every key opens, so a rotation prepends the new key, restarts (rows are re-sealed at start-up by
// `resealUpstreamKeys`), and drops the old key on a later restart. See README "Secrets at rest".
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { isSealed, openSecret, sealSecret } from '@infer/shared';

export interface SecretKeyring {
  /** Seals with this key. */
  readonly currentId: string;
  readonly keys: ReadonlyMap<string, Buffer>;
}

/**
 * Parses `SECRETS_ENCRYPTION_KEY`: comma-separated `<id>:<base64 of 32 bytes>`, newest first (a bare
 * base64 key is id `k1`). Throws naming the bad entry, never echoing key material.
 */
export function parseKeyring(spec: string): SecretKeyring {
  const keys = new Map<string, Buffer>();
  let currentId: string | null = null;
  spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .forEach((entry, i) => {
      const colon = entry.indexOf(':');
      const id = colon < 0 ? 'k1' : entry.slice(0, colon);
      const key = Buffer.from(colon < 0 ? entry : entry.slice(colon + 1), 'base64');
      if (!/^[\w-]{1,32}$/.test(id)) throw new Error(`SECRETS_ENCRYPTION_KEY entry ${i + 1}: the key id must be 1 to 32 letters, digits, _ or -`);
      if (key.length !== 32)
        throw new Error(`SECRETS_ENCRYPTION_KEY entry ${i + 1} (${id}): the key must be 32 bytes, base64-encoded (openssl rand -base64 32)`);
      if (keys.has(id)) throw new Error(`SECRETS_ENCRYPTION_KEY: key id ${id} appears twice`);
      keys.set(id, key);
      currentId ??= id;
    });
  if (currentId === null) throw new Error('SECRETS_ENCRYPTION_KEY holds no key');
  return { currentId, keys };
}

/** A new keyring spec with one random key. */
export const generateKeyringSpec = (id = 'k1'): string => `${id}:${randomBytes(32).toString('base64')}`;

/**
 * The keyring spec stored in `path` (0600), created with a random key when absent. For single-machine
 * installs only: control-plane replicas must share one key, so they are given SECRETS_ENCRYPTION_KEY.
 */
export function loadOrCreateKeyFile(path: string): string {
  if (!existsSync(path)) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    writeFileSync(path, `${generateKeyringSpec()}\n`, { mode: 0o600, flag: 'wx' });
  }
  chmodSync(path, 0o600);
  return readFileSync(path, 'utf8').trim();
}

// One keyring per process: services seal without threading it through every caller. Without an
// installed keyring (tests building apps in-process), a random one lives as long as the process.
let installed: SecretKeyring | null = null;

export function installSecretKeyring(keyring: SecretKeyring): void {
  installed = keyring;
}

function keyring(): SecretKeyring {
  return (installed ??= parseKeyring(generateKeyringSpec('ephemeral')));
}

/** Seals a secret for storage (database, outbox). */
export function sealStoredSecret(plaintext: string): string {
  const k = keyring();
  return sealSecret(plaintext, k.keys.get(k.currentId)!, k.currentId);
}

/** The plaintext of a stored secret (legacy plaintext rows are returned as they are). */
export function openStoredSecret(stored: string): string {
  return isSealed(stored) ? openSecret(stored, keyring().keys) : stored;
}

/** True when the stored value is plaintext or sealed with a key other than the current one. */
export function needsReseal(stored: string): boolean {
  return !stored.startsWith(`enc:v1:${keyring().currentId}:`);
}
