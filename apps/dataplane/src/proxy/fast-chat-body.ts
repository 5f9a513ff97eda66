import { CHAT_ROLES, CONTENT_ROLES, LOGIT_BIAS_KEY } from '@infer/shared';

const ROLES: ReadonlySet<unknown> = new Set(CHAT_ROLES);

/**
 * A hand-written check for the common chat body shape (plain JSON types, no string-coded numbers).
 * It accepts only bodies the zod schema would accept unchanged and returns them as they are; anything
 * else returns null and goes through the schema, so error messages stay the schema's.
 */
export function fastChatBody(raw: unknown): Record<string, unknown> | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const b = raw as Record<string, unknown>;
  const model = b['model'];
  if (model !== undefined && (typeof model !== 'string' || model.length === 0)) return null;
  const messages = b['messages'];
  if (!Array.isArray(messages) || messages.length === 0) return null;
  for (const m of messages) {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return null;
    const role = (m as Record<string, unknown>)['role'];
    if (!ROLES.has(role)) return null;
    const content = (m as Record<string, unknown>)['content'];
    if (content === undefined || content === null) {
      // The schema's rule (CONTENT_ROLES): its error names the field.
      if (CONTENT_ROLES.has(role as string)) return null;
    } else if (typeof content !== 'string' && !Array.isArray(content)) return null;
    if (role === 'tool' && typeof (m as Record<string, unknown>)['tool_call_id'] !== 'string') return null;
  }
  const stream = b['stream'];
  if (stream !== undefined && typeof stream !== 'boolean') return null;
  if (!intIn(b['max_tokens'], 1, Infinity) || !intIn(b['max_completion_tokens'], 1, Infinity) || !intIn(b['n'], 1, 16)) return null;
  if (!intIn(b['seed'], -Infinity, Infinity) || !numIn(b['temperature'], 0, 2) || !numIn(b['top_p'], 0, 1)) return null;
  const stop = b['stop'];
  if (stop !== undefined && stop !== null && typeof stop !== 'string') {
    if (!Array.isArray(stop) || stop.length > 4 || !stop.every((s) => typeof s === 'string')) return null;
  }
  const so = b['stream_options'];
  if (so !== undefined && so !== null) {
    if (typeof so !== 'object' || Array.isArray(so)) return null;
    const iu = (so as Record<string, unknown>)['include_usage'];
    if (iu !== undefined && typeof iu !== 'boolean') return null;
  }
  const tools = b['tools'];
  if (tools !== undefined) {
    if (!Array.isArray(tools) || tools.length === 0 || tools.length > 128) return null;
    for (const t of tools) if (!plainTool(t)) return null;
  }
  const tc = b['tool_choice'];
  if (tc !== undefined && tc !== 'auto' && tc !== 'none' && tc !== 'required' && !(isObject(tc) && typeof tc['type'] === 'string')) return null;
  const rf = b['response_format'];
  if (rf !== undefined && !plainResponseFormat(rf)) return null;
  if (b['logprobs'] !== undefined && typeof b['logprobs'] !== 'boolean') return null;
  if (b['user'] !== undefined && typeof b['user'] !== 'string') return null;
  if (!intIn(b['top_logprobs'], 0, 20) || !numIn(b['presence_penalty'], -2, 2) || !numIn(b['frequency_penalty'], -2, 2)) return null;
  if (b['logit_bias'] !== undefined && !plainLogitBias(b['logit_bias'])) return null;
  return b;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function plainTool(t: unknown): boolean {
  if (!isObject(t)) return false;
  if (t['type'] === 'custom') return true;
  if (t['type'] !== 'function') return false;
  const f = t['function'];
  return isObject(f) && typeof f['name'] === 'string' && TOOL_NAME.test(f['name']);
}

function plainLogitBias(v: unknown): boolean {
  if (!isObject(v)) return false;
  for (const k in v) if (!LOGIT_BIAS_KEY.test(k) || typeof v[k] !== 'number' || !numIn(v[k], -100, 100)) return false;
  return true;
}

function plainResponseFormat(r: unknown): boolean {
  if (!isObject(r)) return false;
  const type = r['type'];
  if (type === 'text' || type === 'json_object') return true;
  const js = r['json_schema'];
  return type === 'json_schema' && isObject(js) && typeof js['name'] === 'string';
}

const intIn = (v: unknown, min: number, max: number): boolean => v === undefined || (typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max);

const numIn = (v: unknown, min: number, max: number): boolean => v === undefined || (typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max);
