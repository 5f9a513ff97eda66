// Prompt tokens of a request the runtime gave no usage for (a stream cut before its usage event, a
// client gone before the answer): counted with a real BPE tokenizer of the model's family instead of
// a characters/4 guess, which ran 11% low. The ranks are bundled in the `gpt-tokenizer` package (no
// download at run time) and loaded on the first count only, so a node whose runtimes always report
// usage never pays for them.
import { randomInt } from 'node:crypto';
import { createRequire } from 'node:module';
import { structuredPromptTexts, wideChars } from '../limits/token-budget.ts';

export interface Encoding {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}

const require = createRequire(import.meta.url);
const encodings = new Map<string, Encoding>();

/**
 * The BPE ranks for a served model name. OpenAI's newer models use o200k_base; Llama 3's tokenizer is
 * cl100k_base's 100k merges plus 28k more, and cl100k_base is the closest bundled ranks for the other
 * open families (Mistral, Qwen, Gemma), within a few percent on English text.
 */
export function encodingFor(model: string): 'o200k_base' | 'cl100k_base' {
  return /(^|\/)(gpt-4o|gpt-4\.1|gpt-5|gpt-oss|o[134](-|$)|chatgpt-4o)/i.test(model) ? 'o200k_base' : 'cl100k_base';
}

function encoding(name: string): Encoding {
  let e = encodings.get(name);
  if (!e) {
    e = require(`gpt-tokenizer/encoding/${name}`) as Encoding;
    encodings.set(name, e);
  }
  return e;
}

/** Template tokens around each message (role header, separators) and priming the reply, as chat templates add. */
export const MESSAGE_OVERHEAD_TOKENS = 4;
export const REPLY_PRIMING_TOKENS = 3;

const NO_SPECIAL = new Set<string>(); // text like "<|endoftext|>" in a message counts as text, never throws

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    let out = '';
    for (const part of content) {
      const text = (part as { text?: unknown } | null)?.text;
      if (typeof text === 'string') out += text;
    }
    return out;
  }
  return content == null ? '' : JSON.stringify(content);
}

/** Characters a prompt may hold and still be counted in full; a longer one is counted from a sample. */
export const EXACT_CHARS = 8192;
/** Longest piece handed to the tokenizer at once: BPE over one long word without spaces grows with its square. */
export const PIECE_CHARS = 1024;
/** Pieces of a longer prompt, spread evenly over it, whose tokens per character count for the whole. */
export const SAMPLE_PIECES = 8;

const isSpace = (c: number): boolean => c === 32 || c === 10 || c === 9 || c === 13;

/**
 * True where a cut changes nothing the tokenizer does: at a single space between two non-space characters (the space
 * joins the word after it either way, and neither side's run of letters, digits or punctuation crosses it).
 */
const wordStart = (text: string, i: number): boolean =>
  i > 0 && i + 1 < text.length && text.charCodeAt(i) === 32 && !isSpace(text.charCodeAt(i - 1)) && !isSpace(text.charCodeAt(i + 1));

/**
 * Where a piece starting at `from` ends: at most PIECE_CHARS on, at a word start (`wordStart`) when one is in its last
 * eighth, never inside a surrogate pair.
 */
function pieceEnd(text: string, from: number): number {
  let end = Math.min(text.length, from + PIECE_CHARS);
  if (end === text.length) return end;
  for (let i = end; i > end - PIECE_CHARS / 8; i--) {
    if (wordStart(text, i)) return i;
  }
  const c = text.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return end;
}

/** Tokens of `text` counted piece by piece (bounded work per call). */
function countPieces(enc: Encoding, text: string): number {
  let tokens = 0;
  for (let at = 0; at < text.length;) {
    const end = pieceEnd(text, at);
    tokens += enc.countTokens(text.slice(at, end), { disallowedSpecial: NO_SPECIAL });
    at = end;
  }
  return tokens;
}

/**
 * Tokens of the texts together: counted in full up to EXACT_CHARS; beyond, SAMPLE_PIECES pieces, one at a random place
 * in each of as many equal stretches, are counted and their tokens per character scaled to the whole, and never less
 * than half a token per wide character. The work is bounded whatever the prompt (a megabyte without spaces took
 * minutes counted whole); a caller cannot know where the pieces fall (fixed places let filler placed there bill a
 * prompt ten times low), and dense CJK or emoji around sampled filler still bills at least that bound.
 */
export function countTexts(enc: Encoding, texts: readonly string[], random: (below: number) => number = randomInt): number {
  let total = 0;
  for (const t of texts) total += t.length;
  if (total <= EXACT_CHARS) {
    let tokens = 0;
    for (const t of texts) tokens += countPieces(enc, t);
    return tokens;
  }
  const joined = texts.join('\n');
  const stride = Math.floor(joined.length / SAMPLE_PIECES);
  let chars = 0;
  let tokens = 0;
  // Wide characters (CJK, kana, Hangul, emoji halves): each is at least about half a token in any text, so half a token
  // each is a bound the bill never goes under, whatever the samples met.
  let wide = 0;
  for (const t of texts) wide += wideChars(t);
  for (let i = 0; i < SAMPLE_PIECES; i++) {
    let from = i * stride + random(Math.max(1, stride - PIECE_CHARS));
    // Start at a word when one begins nearby, so the sample cuts no word at its start either.
    for (let j = from; j < Math.min(joined.length, from + PIECE_CHARS / 8); j++) {
      if (wordStart(joined, j)) {
        from = j;
        break;
      }
    }
    const end = pieceEnd(joined, from);
    chars += end - from;
    tokens += enc.countTokens(joined.slice(from, end), { disallowedSpecial: NO_SPECIAL });
  }
  const sampled = chars === 0 ? 0 : Math.round((tokens * total) / chars);
  return Math.max(sampled, Math.ceil(wide / 2));
}

/**
 * Prompt tokens of a chat body: every message's text and what else the template renders (`structuredPromptTexts`)
 * with the family's tokenizer (`countTexts`), plus template overheads.
 */
export function countPromptTokens(
  body: Record<string, unknown>,
  enc: Encoding = encoding(encodingFor(typeof body['model'] === 'string' ? body['model'] : '')),
): number {
  const messages = Array.isArray(body['messages']) ? body['messages'] : [];
  const texts: string[] = [];
  for (const m of messages) {
    const msg = m as { content?: unknown; name?: unknown } | null;
    texts.push(textOf(msg?.content));
    if (typeof msg?.name === 'string') texts.push(msg.name);
  }
  texts.push(...structuredPromptTexts(body));
  return REPLY_PRIMING_TOKENS + MESSAGE_OVERHEAD_TOKENS * messages.length + countTexts(enc, texts);
}
