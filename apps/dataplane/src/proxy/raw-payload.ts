import { isUtf8 } from 'node:buffer';

/**
 * The runtime's request body made from the client's own bytes, with only the edits the data plane makes spliced
 * in: the top-level `model` set to the replica's served name, and, for a stream, `stream_options.include_usage`
 * forced on (streams are always metered). Serialising the parsed body again instead costs time in proportion to
 * the prompt (about 16 µs for an 8 KiB conversation, then as much again to encode it as UTF-8 for the socket);
 * the splice copies bytes once.
 *
 * Null whenever the edit is not certain to be right, and the caller serialises the parsed body as before: the
 * bytes are not valid UTF-8 (the parsed body holds U+FFFD for them), do not start with `{`, hold a `\u` escape
 * anywhere (a key spelled `"mod\u0065l"` is `model` to every parser but not to a byte search), `"model"` occurs more
 * than once where the body has one (a tool schema may have a `model` property), or the client sent `stream_options`
 * on a stream. Without escapes, every occurrence of the bytes `"model"` is a string token whose text is exactly
 * `model` (inside a JSON string a quote is always escaped), so when there is one and the body has a string `model`,
 * it is the top-level key.
 *
 * The caller passes only bodies that the hand-written check (fast-chat-body.ts) took as they are: the parsed body
 * is then exactly what these bytes say. And only bodies whose numeric members are written as serialising them
 * again would write them (`membersAsWritten`).
 */
export function rawPayload(raw: Buffer, clientModel: unknown, servedModel: string, stream: boolean): Buffer | null {
  const open = skipSpace(raw, 0);
  if (raw[open] !== BRACE_OPEN || raw.indexOf(UNICODE_ESCAPE) >= 0 || !isUtf8(raw)) return null;

  let insert = '';
  if (stream) {
    if (raw.indexOf(STREAM_OPTIONS_KEY) >= 0) return null;
    insert = STREAM_OPTIONS_MEMBER;
  }
  // No top-level `model` (the check lets only a string or nothing through): the served name goes first.
  if (clientModel === undefined) {
    return splice(raw, open + 1, `"model":${JSON.stringify(servedModel)},${insert}`, -1, -1, '');
  }
  if (typeof clientModel !== 'string') return null;
  const key = raw.indexOf(MODEL_KEY);
  if (key < 0 || raw.indexOf(MODEL_KEY, key + MODEL_KEY.length) >= 0) return null;
  if (clientModel === servedModel) return insert === '' ? raw : splice(raw, open + 1, insert, -1, -1, '');
  // The value: a string.
  const valueStart = valueAfter(raw, key + MODEL_KEY.length);
  if (valueStart < 0 || raw[valueStart] !== QUOTE) return null;
  const valueEnd = stringEnd(raw, valueStart);
  if (valueEnd < 0) return null;
  return splice(raw, open + 1, insert, valueStart, valueEnd, JSON.stringify(servedModel));
}

const BRACE_OPEN = 0x7b;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const UNICODE_ESCAPE = Buffer.from('\\u');
const MODEL_KEY = Buffer.from('"model"');
const STREAM_OPTIONS_KEY = Buffer.from('"stream_options"');
const STREAM_OPTIONS_MEMBER = '"stream_options":{"include_usage":true},';

const isSpace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** The index of the first non-whitespace byte at or after `i`. */
function skipSpace(raw: Buffer, i: number): number {
  while (i < raw.length && isSpace(raw[i]!)) i++;
  return i;
}

/** Where the value of a member starts, `keyEnd` being just past its key: after `:` (whitespace around it); -1 when no `:` follows (the name is a value, not a key). */
function valueAfter(raw: Buffer, keyEnd: number): number {
  const colon = skipSpace(raw, keyEnd);
  return raw[colon] === COLON ? skipSpace(raw, colon + 1) : -1;
}

/** The index just past the string token that starts at `start` (a quote), or -1. */
function stringEnd(raw: Buffer, start: number): number {
  for (let i = start + 1; i < raw.length; i++) {
    const b = raw[i];
    if (b === BACKSLASH) i++;
    else if (b === QUOTE) return i + 1;
  }
  return -1;
}

/**
 * `raw` with `insert` placed at `at` (just inside the opening brace: the inserted members end with a comma, and
 * the object has at least `messages`, so a member follows) and [from, to) replaced by `replacement` (from -1: none).
 */
function splice(raw: Buffer, at: number, insert: string, from: number, to: number, replacement: string): Buffer {
  const insertLen = Buffer.byteLength(insert);
  const replaceLen = from < 0 ? 0 : Buffer.byteLength(replacement);
  const out = Buffer.allocUnsafe(raw.length + insertLen + (from < 0 ? 0 : replaceLen - (to - from)));
  let pos = raw.copy(out, 0, 0, at);
  pos += out.write(insert, pos);
  if (from < 0) {
    raw.copy(out, pos, at);
    return out;
  }
  pos += raw.copy(out, pos, at, from);
  pos += out.write(replacement, pos);
  raw.copy(out, pos, to);
  return out;
}

/** Top-level numeric members a body may have and still be spliced (chat bodies have a few; each costs a search). */
const MAX_NUMERIC_MEMBERS = 8;

/**
 * False unless the body's top-level numeric members are written as `JSON.stringify` would write them, once each:
 * - an integer with a fraction or an exponent (`"max_tokens": 16.0`, `1e2`): serialising writes `16`, and a runtime
 *   with a strict parser (TGI, Ollama) refuses `16.0` for an integer field;
 * - an integer member's key twice (as a key, anywhere): serialising keeps the last, a strict parser refuses
 *   duplicates, and a parser that keeps the first would see another `max_tokens` than the limits did;
 * - a number too large for a double (`1e400`): serialising writes `null`;
 * - more than a few numeric members: each costs a search of the whole body, so a body of thousands would cost
 *   quadratic time (the parsed path serialises it in linear time).
 * Numbers deeper in the body (a tool's JSON schema) are free JSON to a runtime and go as written.
 */
export function membersAsWritten(raw: Buffer, body: Record<string, unknown>): boolean {
  let numeric = 0;
  for (const k in body) {
    const v = body[k];
    if (typeof v !== 'number') continue;
    if (++numeric > MAX_NUMERIC_MEMBERS || !Number.isFinite(v)) return false;
    if (!Number.isInteger(v)) continue;
    const key = KNOWN_KEYS.get(k) ?? Buffer.from(JSON.stringify(k));
    let seen = 0;
    for (let at = raw.indexOf(key); at >= 0; at = raw.indexOf(key, at + key.length)) {
      const value = valueAfter(raw, at + key.length);
      if (value < 0) continue; // the name as a value, not a key
      if (++seen > 1) return false;
      for (let i = value; i < raw.length; i++) {
        const d = raw[i]!;
        if (d === DOT || d === LOWER_E || d === UPPER_E) return false;
        if (!((d >= DIGIT_0 && d <= DIGIT_9) || d === MINUS || d === PLUS)) break;
      }
    }
  }
  return true;
}

const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

/** `"name"` as bytes for the numeric members chat bodies carry (others are made per request). */
const KNOWN_KEYS: ReadonlyMap<string, Buffer> = new Map(
  ['max_tokens', 'max_completion_tokens', 'n', 'seed', 'temperature', 'top_p', 'top_k', 'top_logprobs', 'presence_penalty', 'frequency_penalty'].map((k) => [
    k,
    Buffer.from(JSON.stringify(k)),
  ]),
);
