import type { ChatUsage } from '@infer/shared';
import { binaryModelField, objectEnd } from './binary.ts';

export interface JsonAnswer {
  /** The body to send, `model` rewritten to the client's name. */
  readonly body: string;
  /**
   * True when `body` is binary (one character per byte of the runtime's UTF-8, to be written as latin1; its length
   * is its size): the fast path never decodes or re-encodes the answer. False: an ordinary string (the slow path).
   */
  readonly binary: boolean;
  readonly usage: ChatUsage | null;
  /** Completion tokens estimated from the text when the runtime gave no usage (else 0). */
  readonly completionEstimate: number;
}

function readUsage(u: unknown): ChatUsage | null {
  if (typeof u !== 'object' || u === null) return null;
  const r = u as Record<string, unknown>;
  const p = r['prompt_tokens'];
  const c = r['completion_tokens'];
  return typeof p === 'number' && typeof c === 'number' ? { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } : null;
}

/** Characters / 4 of everything the model generated: the content, the reasoning, and the tool calls' names and arguments. */
function estimateCompletion(obj: Record<string, unknown>): number {
  let chars = 0;
  const text = (v: unknown): void => {
    if (typeof v === 'string') chars += v.length;
  };
  const choices = obj['choices'];
  if (Array.isArray(choices)) {
    for (const ch of choices) {
      const m = (ch as { message?: Record<string, unknown> } | null)?.message;
      if (typeof m !== 'object' || m === null) continue;
      text(m['content']);
      // The reasoning under either name (a runtime may send both, the same text twice): counted once.
      const r1 = m['reasoning_content'];
      const r2 = m['reasoning'];
      chars += Math.max(typeof r1 === 'string' ? r1.length : 0, typeof r2 === 'string' ? r2.length : 0);
      const calls = m['tool_calls'];
      if (Array.isArray(calls)) {
        for (const call of calls) {
          const f = (call as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
          text(f?.name);
          text(f?.arguments);
        }
      }
      const legacy = m['function_call'] as { name?: unknown; arguments?: unknown } | null | undefined;
      text(legacy?.name);
      text(legacy?.arguments);
    }
  }
  return Math.ceil(chars / 4);
}

const USAGE_KEY = '"usage":';

/**
 * Fast path, on the binary view of the runtime's bytes: read `usage` from its own small slice and splice the
 * model name, without decoding, parsing and re-serialising the whole answer. Falls back to a full parse when
 * the shape is unusual.
 */
function fastPath(text: string, served: string, clientModel: string): JsonAnswer | null {
  const at = text.lastIndexOf(USAGE_KEY);
  if (at < 0) return null;
  const start = at + USAGE_KEY.length;
  if (text.charCodeAt(start) !== 0x7b) return null;
  const end = objectEnd(text, start, text.length);
  if (end < 0) return null;
  let usage: ChatUsage | null;
  try {
    usage = readUsage(JSON.parse(text.slice(start, end)));
  } catch {
    return null;
  }
  if (usage === null) return null;
  let out = text;
  if (served !== clientModel) {
    const from = binaryModelField(served);
    const i = text.indexOf(from);
    if (i < 0) return null;
    out = text.slice(0, i) + binaryModelField(clientModel) + text.slice(i + from.length);
  }
  return { body: out, binary: true, usage, completionEstimate: 0 };
}

/** Reads a runtime's JSON chat answer (its bytes); null when it is not a JSON object. */
export function readJsonAnswer(buf: Buffer, served: string, clientModel: string): JsonAnswer | null {
  const first = buf[0];
  const last = buf[buf.length - 1];
  // Compact `{...}` bodies take the fast path; anything else is parsed whole.
  if (first === 0x7b && (last === 0x7d || last === 0x0a)) {
    const fast = fastPath(buf.toString('latin1'), served, clientModel);
    if (fast !== null) return fast;
  }
  const text = buf.toString('utf8');
  let obj: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
    obj = parsed as Record<string, unknown>;
  } catch {
    return null;
  }
  const usage = readUsage(obj['usage']);
  let out = text;
  if (served !== clientModel && typeof obj['model'] === 'string') {
    obj['model'] = clientModel;
    out = JSON.stringify(obj);
  }
  return { body: out, binary: false, usage, completionEstimate: usage === null ? estimateCompletion(obj) : 0 };
}
