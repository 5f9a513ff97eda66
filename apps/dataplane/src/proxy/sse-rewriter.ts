import type { ChatUsage } from '@infer/shared';

/** Rewrites an upstream SSE stream chunk by chunk: `model` back to the client's name, the usage chunk read (and dropped when unwanted). */
export interface SseRewriter {
  /** Takes one upstream chunk; returns what to send now (complete lines only). */
  push(chunk: Buffer): Buffer | string | null;
  /** The trailing partial line, if the upstream ended without a newline. */
  end(): Buffer | null;
  /** True once `data: [DONE]` went through. */
  readonly sawDone: boolean;
  readonly usage: ChatUsage | null;
  /** Chunks that carried non-empty `content` (one token each, when the runtime reports no usage). */
  readonly contentChunks: number;
}

export interface SseRewriterOptions {
  /** The served model name to replace, and its replacement; equal means no rewrite. */
  readonly from: string;
  readonly to: string;
  /** Drop the usage-only chunk (empty `choices`) because the client did not ask for it. */
  readonly dropUsageChunk: boolean;
}

const NL = 0x0a;
const DONE = 'data: [DONE]';
const DATA = 'data:';

function readUsage(u: unknown): ChatUsage | null {
  if (typeof u !== 'object' || u === null) return null;
  const r = u as Record<string, unknown>;
  const p = r['prompt_tokens'];
  const c = r['completion_tokens'];
  if (typeof p !== 'number' || typeof c !== 'number') return null;
  return { prompt_tokens: p, completion_tokens: c, total_tokens: typeof r['total_tokens'] === 'number' ? r['total_tokens'] : p + c };
}

const QUOTE = 0x22;
const SPACE = 0x20;
const BRACE = 0x7b;

/**
 * The keys the rewriter acts on, found in one pass (a regex scans as fast as one indexOf, where a
 * search per key would scan the text once per key). JSON escapes quotes inside strings, so a match
 * is always a real key.
 */
const KEYS = /"(?:model|content|usage)":/g;

function hasDone(text: string): boolean {
  // [DONE] ends a stream: search from the end.
  let i = text.lastIndexOf(DONE);
  while (i >= 0) {
    if (i === 0 || text.charCodeAt(i - 1) === NL) return true;
    i = i === 0 ? -1 : text.lastIndexOf(DONE, i - 1);
  }
  return false;
}

/** Creates a rewriter for one stream. */
export function createSseRewriter(opts: SseRewriterOptions): SseRewriter {
  const rewrite = opts.from !== opts.to;
  const fromValue = JSON.stringify(opts.from);
  const toCompact = `"model":${JSON.stringify(opts.to)}`;
  const toSpaced = `"model": ${JSON.stringify(opts.to)}`;
  let rest: Buffer | null = null;
  let sawDone = false;
  let usage: ChatUsage | null = null;
  let contentChunks = 0;
  /** Edits of the current text: [start, end, kind] triples in order (kind 0/1: model compact/spaced, 2: drop). */
  const edits: number[] = [];

  /** Reads usage from the data line around `at`; returns the end of the event when it is to be dropped, else -1. */
  const takeUsage = (text: string, lineStart: number, lineEnd: number): number => {
    if (!text.startsWith(DATA, lineStart)) return -1;
    let obj: Record<string, unknown>;
    try {
      obj = JSON.parse(text.slice(lineStart + DATA.length, lineEnd)) as Record<string, unknown>;
    } catch {
      return -1;
    }
    const u = readUsage(obj['usage']);
    if (u === null) return -1;
    usage = u;
    const choices = obj['choices'];
    if (!opts.dropUsageChunk || !Array.isArray(choices) || choices.length !== 0) return -1;
    // Drop the event: its data line and the blank line that ends it.
    let cut = lineEnd + 1;
    if (text.charCodeAt(cut) === 13) cut++;
    if (text.charCodeAt(cut) === NL) cut++;
    return Math.min(cut, text.length);
  };

  const processLines = (buf: Buffer): Buffer | string | null => {
    const text = buf.toString('utf8');
    if (!sawDone && hasDone(text)) sawDone = true;
    edits.length = 0;
    let usageLineEnd = 0;
    let dropEnd = 0;
    KEYS.lastIndex = 0;
    for (let m = KEYS.exec(text); m !== null; m = KEYS.exec(text)) {
      const at = m.index;
      const value = at + m[0].length;
      const key = text.charCodeAt(at + 1);
      if (key === 0x63) {
        // "content": one token per chunk that carries non-empty content (when the runtime reports no usage).
        if (text.charCodeAt(value) === QUOTE && text.charCodeAt(value + 1) !== QUOTE) contentChunks++;
      } else if (key === 0x6d) {
        if (!rewrite || at < dropEnd) continue;
        if (text.startsWith(fromValue, value)) edits.push(at, value + fromValue.length, 0);
        else if (text.charCodeAt(value) === SPACE && text.startsWith(fromValue, value + 1)) edits.push(at, value + 1 + fromValue.length, 1);
      } else if (at >= usageLineEnd) {
        const c = text.charCodeAt(value);
        if (c !== BRACE && (c !== SPACE || text.charCodeAt(value + 1) !== BRACE)) continue;
        // Once per stream (usually): the line that carries usage is parsed, and dropped if unwanted.
        const lineStart = text.lastIndexOf('\n', at) + 1;
        let lineEnd = text.indexOf('\n', at);
        if (lineEnd < 0) lineEnd = text.length;
        usageLineEnd = lineEnd;
        const cut = takeUsage(text, lineStart, lineEnd);
        if (cut < 0) continue;
        while (edits.length > 0 && edits[edits.length - 3]! >= lineStart) edits.length -= 3;
        edits.push(lineStart, cut, 2);
        dropEnd = cut;
      }
    }
    if (edits.length === 0) return buf;
    let out = '';
    let last = 0;
    for (let i = 0; i < edits.length; i += 3) {
      out += text.slice(last, edits[i]);
      const kind = edits[i + 2];
      if (kind === 0) out += toCompact;
      else if (kind === 1) out += toSpaced;
      last = edits[i + 1]!;
    }
    out += text.slice(last);
    return out.length > 0 ? out : null;
  };

  return {
    push(chunk) {
      const buf = rest === null ? chunk : Buffer.concat([rest, chunk]);
      // Cut at the last newline: a newline byte never sits inside a multi-byte UTF-8 character.
      const nl = buf.lastIndexOf(NL);
      if (nl < 0) {
        rest = buf;
        return null;
      }
      if (nl === buf.length - 1) {
        rest = null;
        return processLines(buf);
      }
      rest = buf.subarray(nl + 1);
      return processLines(buf.subarray(0, nl + 1));
    },
    end() {
      if (rest === null) return null;
      const r = rest;
      rest = null;
      const out = processLines(r);
      return out === null ? null : typeof out === 'string' ? Buffer.from(out) : out;
    },
    get sawDone() {
      return sawDone;
    },
    get usage() {
      return usage;
    },
    get contentChunks() {
      return contentChunks;
    },
  };
}
