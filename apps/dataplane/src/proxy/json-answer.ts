import type { ChatUsage } from '@infer/shared';

export interface JsonAnswer {
  /** The body to send, `model` rewritten to the client's name. */
  readonly text: string;
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

function estimateCompletion(obj: Record<string, unknown>): number {
  let chars = 0;
  const choices = obj['choices'];
  if (Array.isArray(choices)) {
    for (const ch of choices) {
      const c = (ch as { message?: { content?: unknown } }).message?.content;
      if (typeof c === 'string') chars += c.length;
    }
  }
  return Math.ceil(chars / 4);
}

const USAGE_KEY = '"usage":';

/**
 * Fast path: read `usage` from its own small slice and splice the model name, without parsing and
 * re-serialising the whole answer. Falls back to a full parse when the shape is unusual.
 */
function fastPath(text: string, served: string, clientModel: string): JsonAnswer | null {
  const at = text.lastIndexOf(USAGE_KEY);
  if (at < 0) return null;
  const start = at + USAGE_KEY.length;
  if (text.charCodeAt(start) !== 0x7b) return null;
  // Usage objects hold only numbers (and maybe nested detail objects of numbers); strings go the slow way.
  let end = -1;
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) {
      end = i + 1;
      break;
    } else if (c === 0x22 && depth === 0) return null;
  }
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
    const from = `"model":${JSON.stringify(served)}`;
    const i = text.indexOf(from);
    if (i < 0) return null;
    out = text.slice(0, i) + `"model":${JSON.stringify(clientModel)}` + text.slice(i + from.length);
  }
  return { text: out, usage, completionEstimate: 0 };
}

/** Reads a runtime's JSON chat answer; null when it is not a JSON object. */
export function readJsonAnswer(text: string, served: string, clientModel: string): JsonAnswer | null {
  const first = text.charCodeAt(0);
  const last = text.charCodeAt(text.length - 1);
  // Compact `{...}` bodies take the fast path; anything else is parsed whole.
  if (first === 0x7b && (last === 0x7d || last === 0x0a)) {
    const fast = fastPath(text, served, clientModel);
    if (fast !== null) return fast;
  }
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
  return { text: out, usage, completionEstimate: usage === null ? estimateCompletion(obj) : 0 };
}
