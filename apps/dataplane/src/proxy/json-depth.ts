import { ApiError } from '@infer/shared';

/** Deepest nesting of arrays and objects a chat body may have (real bodies stay under 10). */
export const MAX_JSON_DEPTH = 64;

/**
 * True when the JSON text nests arrays/objects deeper than `max`. One loop, no recursion and no
 * allocation, so a hostile body cannot exhaust the stack here (parsing it, walking it or serialising it
 * again later could); it runs on the raw text, before parsing. Brackets inside strings do not count.
 */
export function exceedsJsonDepth(text: string, max: number = MAX_JSON_DEPTH): boolean {
  // Too short to hold max + 1 opening brackets.
  if (text.length <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** The 400 for a body nested too deeply. */
export const tooDeepError = (max: number = MAX_JSON_DEPTH): ApiError =>
  new ApiError('invalid_json', `The request body nests arrays or objects more than ${max} levels deep.`);
