import { ApiError } from '@infer/shared';

/** Per-message template overhead and reply priming, as chat templates add them. */
const MESSAGE_OVERHEAD = 4;
const REPLY_PRIMING = 3;
/** The chars/4 estimate is rough; the pre-check only refuses what is over even at 3/4 of it. */
const PROMPT_LOWER_BOUND = 0.75;

/** CJK, kana, Hangul and the rest from U+2E80 (UTF-16 units, so an emoji's two count two): about a token each, not a quarter. */
const HAS_WIDE = /[\u2e80-\uffff]/;
const WIDE_FROM = 0x2e80;

/** Wide characters of `text` (UTF-16 units from U+2E80). No allocation. */
export function wideChars(text: string): number {
  if (!HAS_WIDE.test(text)) return 0;
  let wide = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= WIDE_FROM) wide++;
  return wide;
}

/** Characters of `text` as the estimate weighs them: 1 each, 4 (a whole token) for a wide one. No allocation. */
export function weightedLength(text: string): number {
  return text.length + 3 * wideChars(text);
}

/**
 * What the chat template renders into the prompt besides each message's content and name, as JSON texts: the
 * functions offered (`tools`, and the legacy `functions`: their names, descriptions and schemas) and the tool calls of
 * earlier assistant turns. The limits' estimate and the billing count both read them here: a prompt carried in a tool's
 * description is as long for the runtime as one in a message.
 */
export function structuredPromptTexts(body: Record<string, unknown>): readonly string[] {
  // Most requests carry none: nothing is allocated for them (this runs on every request).
  let out: string[] | null = null;
  const tools = body['tools'];
  if (Array.isArray(tools) && tools.length > 0) out = withJson(out, tools);
  const functions = body['functions'];
  if (Array.isArray(functions) && functions.length > 0) out = withJson(out, functions);
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    for (const m of messages) {
      const msg = m as { tool_calls?: unknown; function_call?: unknown } | null;
      if (Array.isArray(msg?.tool_calls) && msg.tool_calls.length > 0) out = withJson(out, msg.tool_calls);
      if (typeof msg?.function_call === 'object' && msg.function_call !== null) out = withJson(out, msg.function_call);
    }
  }
  return out ?? NONE;
}

const NONE: readonly string[] = Object.freeze([]);

function withJson(out: string[] | null, v: unknown): string[] {
  const list = out ?? [];
  list.push(JSON.stringify(v));
  return list;
}

/**
 * Estimated prompt tokens: characters / 4 (a CJK character and the like a token each) of the messages' content and
 * what else the template renders (`structuredPromptTexts`), plus the template's per-message overhead. Cheap on purpose:
 * it runs on every request; billing without the runtime's usage counts with a real tokenizer (usage/prompt-tokens.ts).
 */
export function estimatePromptTokens(body: Record<string, unknown>): number {
  let chars = 0;
  let count = 0;
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    count = messages.length;
    for (const m of messages) {
      const c = (m as { content?: unknown } | null)?.content;
      chars += typeof c === 'string' ? weightedLength(c) : c == null ? 0 : weightedLength(JSON.stringify(c));
    }
  }
  for (const t of structuredPromptTexts(body)) chars += weightedLength(t);
  return Math.ceil(chars / 4) + count * MESSAGE_OVERHEAD + REPLY_PRIMING;
}

/**
 * The completion cap the client asked for, or null: `max_completion_tokens` (OpenAI's current name) before the
 * deprecated `max_tokens`, as vLLM and SGLang read them, so the limits count the cap the runtime will apply.
 */
export function requestedCompletion(body: Record<string, unknown>): number | null {
  const m = body['max_completion_tokens'] ?? body['max_tokens'];
  return typeof m === 'number' && Number.isFinite(m) && m > 0 ? Math.floor(m) : null;
}

/** Throws 400 `context_length_exceeded` when the request is clearly over the entry's context length. */
export function checkContextLength(contextLength: number | null, prompt: number, maxTokens: number | null): void {
  if (contextLength === null) return;
  const completion = maxTokens ?? 0;
  if (completion < contextLength && Math.floor(prompt * PROMPT_LOWER_BOUND) + completion <= contextLength) return;
  const asked =
    maxTokens === null
      ? `about ${prompt} tokens in the messages`
      : `about ${prompt + completion} tokens (about ${prompt} in the messages, ${completion} in the completion)`;
  throw new ApiError(
    'context_length_exceeded',
    `This model's maximum context length is ${contextLength} tokens. However, you requested ${asked}. Please reduce the length of the messages or the completion.`,
    'messages',
  );
}

/**
 * Tokens to reserve: the prompt plus the completion cap (x `n` choices); without `max_tokens`,
 * `defaultCompletion` bounded by the room the context leaves.
 */
export function reservationTokens(
  body: Record<string, unknown>,
  prompt: number,
  maxTokens: number | null,
  contextLength: number | null,
  defaultCompletion: number,
): number {
  const n = body['n'];
  const choices = typeof n === 'number' && Number.isInteger(n) && n > 1 ? n : 1;
  const room = contextLength === null ? defaultCompletion : Math.max(1, Math.min(defaultCompletion, contextLength - prompt));
  return prompt + (maxTokens ?? room) * choices;
}
