// A deterministic stand-in for a real tokenizer: a run of word characters costs one token per
// started 4 characters, every other non-space character costs one. The simulator's own output
// vocabulary is built so that countTokens(completion text) === completion_tokens.

/** Per-message overhead (role and separators), like chat templates add. */
export const MESSAGE_OVERHEAD_TOKENS = 4;
/** Tokens the template adds to prime the assistant reply. */
export const REPLY_PRIMING_TOKENS = 3;

function isWordChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95;
}

function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || c === 160;
}

/** Counts the simulator's tokens in a text. */
export function countTokens(text: string): number {
  let tokens = 0;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isWordChar(c)) {
      run++;
      continue;
    }
    if (run > 0) {
      tokens += (run + 3) >> 2;
      run = 0;
    }
    if (!isSpace(c)) tokens++;
  }
  if (run > 0) tokens += (run + 3) >> 2;
  return tokens;
}

/** The text of a message's content: a string, or the text parts of a content array. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content) {
    if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
      out += (part as { text: string }).text;
    }
  }
  return out;
}

/** Prompt tokens of a chat request: its message contents plus the template overheads. */
export function countPromptTokens(messages: readonly { readonly content?: unknown }[]): number {
  let tokens = REPLY_PRIMING_TOKENS;
  for (const m of messages) tokens += MESSAGE_OVERHEAD_TOKENS + countTokens(contentText(m.content));
  return tokens;
}

const START = 0xfffff0;
const SEP = 0xfffff1;
const END = 0xfffff2;

function wordId(text: string, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Appends the ids of a text's tokens (the same split countTokens counts: 4-character word pieces, other characters). */
function pushTokenIds(text: string, out: number[]): void {
  let run = -1;
  const flush = (end: number): void => {
    for (let s = run; s < end; s += 4) out.push(wordId(text, s, Math.min(end, s + 4)));
    run = -1;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isWordChar(c)) {
      if (run < 0) run = i;
      continue;
    }
    if (run >= 0) flush(i);
    if (!isSpace(c)) out.push(0x1000000 + c);
  }
  if (run >= 0) flush(text.length);
}

/**
 * The prompt as token ids, laid out like a chat template (per message: start, role, separator, content, end;
 * then the assistant priming). Its length is exactly countPromptTokens(messages); prefix caching hashes it.
 */
export function promptTokenIds(messages: readonly { readonly role?: unknown; readonly content?: unknown }[]): Uint32Array {
  const out: number[] = [];
  for (const m of messages) {
    out.push(START, wordId(String(m.role), 0, String(m.role).length), SEP);
    pushTokenIds(contentText(m.content), out);
    out.push(END);
  }
  out.push(START, wordId('assistant', 0, 9), SEP);
  return Uint32Array.from(out);
}
