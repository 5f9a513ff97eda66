import type { ErrorCode } from '@infer/shared';

export interface SimMessage {
  readonly role: string;
  readonly content?: unknown;
}

/** The fields of a chat request the simulator acts on. */
export interface SimChatRequest {
  readonly model: string;
  readonly messages: readonly SimMessage[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly maxTokens: number | null;
  readonly seed: number | null;
  readonly stop: readonly string[];
}

export interface ParseFailure {
  readonly code: ErrorCode;
  readonly message: string;
  readonly param: string | null;
}

const fail = (code: ErrorCode, message: string, param: string | null = null): ParseFailure => ({ code, message, param });
const NO_STOP: readonly string[] = [];

// Hand-rolled on purpose: this is the hot path of a simulator measured at thousands of requests/s.
function intField(body: Record<string, unknown>, name: string): number | null | ParseFailure {
  const v = body[name];
  if (v === undefined || v === null) return null;
  const n = typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) return fail('invalid_request', `${name} must be an integer`, name);
  return n;
}

/** Parses and validates a chat-completions body (vLLM-like rules); returns a failure to render as 400/404. */
export function parseChatRequest(raw: Buffer, models: readonly string[]): SimChatRequest | ParseFailure {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    return fail('invalid_json', 'request body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return fail('invalid_request', 'request body must be a JSON object');
  const b = body as Record<string, unknown>;

  const model = b['model'] ?? models[0]!;
  if (typeof model !== 'string') return fail('invalid_request', 'model must be a string', 'model');
  if (!models.includes(model)) return fail('model_not_found', `The model \`${model}\` does not exist.`, 'model');

  const messages = b['messages'];
  if (!Array.isArray(messages) || messages.length === 0) return fail('invalid_request', 'messages must be a non-empty array', 'messages');
  for (const m of messages) {
    if (typeof m !== 'object' || m === null || typeof (m as SimMessage).role !== 'string') {
      return fail('invalid_request', 'each message needs a string role', 'messages');
    }
    const c = (m as SimMessage).content;
    if (c !== undefined && c !== null && typeof c !== 'string' && !Array.isArray(c)) {
      return fail('invalid_request', 'message content must be a string or an array of parts', 'messages');
    }
  }

  const s = b['stream'];
  if (s !== undefined && s !== null && typeof s !== 'boolean' && s !== 'true' && s !== 'false')
    return fail('invalid_request', 'stream must be a boolean', 'stream');
  const stream = s === true || s === 'true';
  const so = b['stream_options'];
  const includeUsage = stream && typeof so === 'object' && so !== null && (so as { include_usage?: unknown }).include_usage === true;

  // The current name first, as vLLM and SGLang read them (`max_completion_tokens or max_tokens`).
  const capField = b['max_completion_tokens'] != null ? 'max_completion_tokens' : 'max_tokens';
  const maxTokens = intField(b, capField);
  if (typeof maxTokens === 'object' && maxTokens !== null) return maxTokens;
  if (maxTokens !== null && maxTokens < 1) return fail('invalid_request', `${capField} must be at least 1`, capField);
  const seed = intField(b, 'seed');
  if (typeof seed === 'object' && seed !== null) return seed;
  const n = intField(b, 'n');
  if (typeof n === 'object' && n !== null) return n;
  if (n !== null && n !== 1) return fail('invalid_request', 'n must be 1: this runtime returns one choice per request', 'n');

  let stop = NO_STOP;
  const st = b['stop'];
  if (typeof st === 'string') stop = st.length > 0 ? [st] : NO_STOP;
  else if (Array.isArray(st)) {
    if (!st.every((x) => typeof x === 'string')) return fail('invalid_request', 'stop must be a string or an array of strings', 'stop');
    stop = (st as string[]).filter((x) => x.length > 0);
  } else if (st !== undefined && st !== null) return fail('invalid_request', 'stop must be a string or an array of strings', 'stop');

  return { model, messages: messages as SimMessage[], stream, includeUsage, maxTokens, seed, stop };
}
