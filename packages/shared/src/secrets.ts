import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function base62(bytes: Uint8Array, length: number): string {
  let out = '';
  for (const b of bytes) {
    if (out.length >= length) break;
    if (b < 248) out += ALPHABET[b % 62]; // 248 = 62*4: no modulo bias
  }
  return out;
}

function crc32(s: string): number {
  let c = ~0;
  for (let i = 0; i < s.length; i++) {
    c ^= s.charCodeAt(i);
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

function checksum(body: string): string {
  let n = crc32(body);
  let out = '';
  for (let i = 0; i < 6; i++) {
    out = ALPHABET[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

/** Secret kinds: inference API keys, admin tokens, data-plane node credentials. */
export const SECRET_PREFIX = { inference: 'infk_', admin: 'infa_', node: 'infn_' } as const;

/** A scanner-recognisable secret: fixed prefix, 32 random base62 chars, 6-char CRC32 checksum. */
export function generateSecret(prefix: string): string {
  let body = '';
  while (body.length < 32) body += base62(randomBytes(48), 32 - body.length);
  return `${prefix}${body}${checksum(prefix + body)}`;
}

/** True when the secret's checksum matches (cheap rejection of typos before any lookup). */
export function hasValidChecksum(secret: string): boolean {
  if (secret.length < 10) return false;
  return checksum(secret.slice(0, -6)) === secret.slice(-6);
}

/** The visible prefix stored beside the hash (enough to recognise, not to use). */
export const secretDisplayPrefix = (secret: string): string => secret.slice(0, 12);

/** SHA-256 hex: the only form a secret is stored in. */
export const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('hex');
