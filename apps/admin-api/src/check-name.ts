import { ServiceError } from './errors.ts';

/**
 * What no name may hold: NUL (PostgreSQL text cannot store it) and the other C0 and C1 controls with DEL, and the
 * bidirectional embeddings, overrides (U+202A-U+202E) and isolates (U+2066-U+2069) that make a name display as other
 * text (`key‮txt.exe` shown as `keyexe.txt`).
 */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const FORBIDDEN = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u;

const codePoint = (ch: string): string => `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/** Refuses a name (or a name to look up) holding a control or bidi-formatting character; `field` is the error's `param`. */
export function checkNameCharacters(value: string, field: string): void {
  const found = FORBIDDEN.exec(value)?.[0];
  if (found === undefined) return;
  const what = found === '\u0000' ? 'a NUL character' : found >= '\u202a' ? 'a bidirectional formatting character' : 'a control character';
  throw new ServiceError('invalid', `${field} must not contain ${what} (${codePoint(found)})`, field);
}

export interface NameRules {
  /** Most characters, after trimming. */
  readonly max: number;
  /** Fewest characters, after trimming (default 1; 0: an empty name is allowed). */
  readonly min?: number;
  /** Refuse any whitespace inside (a name that is a URL path segment). */
  readonly noSpaces?: boolean;
}

/**
 * The one check of a name a caller gives (tenant, API key, admin token, node credential, catalog entry, user): trimmed,
 * of `rules.min` to `rules.max` characters, no control or bidi-formatting characters. Returns the trimmed name; a
 * refusal is a 400 `invalid` naming `field`.
 */
export function checkName(raw: string, field: string, rules: NameRules): string {
  const name = raw.trim(); // surrounding whitespace (a pasted newline included) is dropped, not refused
  checkNameCharacters(name, field);
  const min = rules.min ?? 1;
  if (name.length < min || name.length > rules.max || (rules.noSpaces === true && /\s/.test(name))) {
    const spaces = rules.noSpaces === true ? ' without spaces' : '';
    throw new ServiceError(
      'invalid',
      min === 0 ? `${field} must be at most ${rules.max} characters${spaces}` : `${field} must be ${min}-${rules.max} characters${spaces}`,
      field,
    );
  }
  return name;
}

/** The longest catalog Name (the <endpoint_name> of inference URLs): a longer one names no entry. */
export const MAX_ENTRY_NAME_LENGTH = 200;

/** The longest runtime URL a service takes (an upstream's, a deployment's externalUrl): the routers cap theirs the same. */
export const MAX_URL_LENGTH = 2000;

/** Refuses a URL longer than MAX_URL_LENGTH (before any parsing or trimming of it), naming `param`. */
export function checkUrlLength(url: string, param: string): void {
  if (url.length > MAX_URL_LENGTH) throw new ServiceError('invalid', `${param} must be at most ${MAX_URL_LENGTH} characters`, param);
}
