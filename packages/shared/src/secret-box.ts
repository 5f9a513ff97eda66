import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

// Secrets at rest (upstream provider API keys): AES-256-GCM, the key id in clear in front so a
// keyring can hold the old key beside the new one while rows are re-sealed (rotation).
// Form: `enc:v1:<keyId>:<base64url(iv[12] | ciphertext | tag[16])>`.

const PREFIX = 'enc:v1:';

/** True when the value is a sealed secret (anything else is legacy plaintext). */
export const isSealed = (value: string): boolean => value.startsWith(PREFIX);

/** The key id a sealed value was made with, or null for plaintext. */
export function sealedKeyId(value: string): string | null {
  if (!isSealed(value)) return null;
  const end = value.indexOf(':', PREFIX.length);
  return end < 0 ? null : value.slice(PREFIX.length, end);
}

/** Seals `plaintext` with a 32-byte key; `keyId` is [A-Za-z0-9_-]{1,32}. */
export function sealSecret(plaintext: string, key: Buffer, keyId: string): string {
  if (key.length !== 32) throw new Error('secret key must be 32 bytes');
  if (!/^[\w-]{1,32}$/.test(keyId)) throw new Error('secret key id must be 1 to 32 letters, digits, _ or -');
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(keyId));
  const body = Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `${PREFIX}${keyId}:${body.toString('base64url')}`;
}

/** Opens a sealed value with the key its id names; throws when the key is unknown or the value was tampered with. */
export function openSecret(sealed: string, keys: ReadonlyMap<string, Buffer>): string {
  const keyId = sealedKeyId(sealed);
  if (keyId === null) throw new Error('not a sealed secret');
  const key = keys.get(keyId);
  if (!key) throw new Error(`no secret key with id ${keyId} (was it removed before every value was re-sealed?)`);
  const body = Buffer.from(sealed.slice(PREFIX.length + keyId.length + 1), 'base64url');
  if (body.length < 28) throw new Error('sealed secret is truncated');
  const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, 12));
  decipher.setAAD(Buffer.from(keyId));
  decipher.setAuthTag(body.subarray(body.length - 16));
  return Buffer.concat([decipher.update(body.subarray(12, body.length - 16)), decipher.final()]).toString('utf8');
}

/** A 32-byte key derived from another secret (e.g. a node's credential), for one purpose. */
export const deriveSecretKey = (secret: string, purpose: string): Buffer => Buffer.from(hkdfSync('sha256', secret, 'infer-secret-box', purpose, 32));
