/**
 * "Binary" strings: one character per byte (latin1), how the relay holds a runtime's answer so that it is never
 * decoded from UTF-8 nor encoded again; written back with the `latin1` encoding they are the same bytes.
 */

/** `s` as a binary string: one character per UTF-8 byte. */
export const binaryOf = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');

/** `"model":<name>` (compact JSON) as a binary string, cached for the few names a node sees. */
const modelFields = new Map<string, string>();
export function binaryModelField(name: string): string {
  let f = modelFields.get(name);
  if (f === undefined) {
    if (modelFields.size >= 1024) modelFields.clear();
    f = binaryOf(`"model":${JSON.stringify(name)}`);
    modelFields.set(name, f);
  }
  return f;
}

/**
 * The end (exclusive) of the JSON object that starts at `start` (a `{`) in `text`, looking no further than `limit`;
 * strings inside are skipped so their braces do not count. -1 when it cannot be cut out cleanly (no end, an escaped
 * quote): the caller then parses the whole document instead. Used to read `usage` from its own small slice.
 */
export function objectEnd(text: string, start: number, limit: number): number {
  let depth = 0;
  for (let i = start; i < limit; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b) depth++;
    else if (c === 0x7d) {
      if (--depth === 0) return i + 1;
    } else if (c === 0x22) {
      const close = text.indexOf('"', i + 1);
      if (close < 0 || close >= limit || text.charCodeAt(close - 1) === 0x5c) return -1;
      i = close;
    }
  }
  return -1;
}
