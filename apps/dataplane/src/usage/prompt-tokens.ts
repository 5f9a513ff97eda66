// Prompt tokens of a request the runtime gave no usage for (a stream cut before its usage event, a
// client gone before the answer): counted with a real BPE tokenizer of the model's family instead of
// a characters/4 guess, which ran 11% low. The ranks are bundled in the `gpt-tokenizer` package (no
// download at run time) and loaded on the first count only, so a node whose runtimes always report
// usage never pays for them.
import { createRequire } from 'node:module';

interface Encoding {
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

/** Prompt tokens of a chat body: every message's text with the family's tokenizer, plus template overheads. */
export function countPromptTokens(body: Record<string, unknown>): number {
  const model = typeof body['model'] === 'string' ? body['model'] : '';
  const enc = encoding(encodingFor(model));
  const messages = Array.isArray(body['messages']) ? body['messages'] : [];
  let tokens = REPLY_PRIMING_TOKENS;
  for (const m of messages) {
    const msg = m as { role?: unknown; content?: unknown; name?: unknown } | null;
    tokens += MESSAGE_OVERHEAD_TOKENS + enc.countTokens(textOf(msg?.content), { disallowedSpecial: NO_SPECIAL });
    if (typeof msg?.name === 'string') tokens += enc.countTokens(msg.name, { disallowedSpecial: NO_SPECIAL });
  }
  return tokens;
}
