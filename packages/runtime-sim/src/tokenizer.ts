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
