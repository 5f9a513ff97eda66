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
  /** `data:` events seen (a rough completion-token count when the runtime reports no usage). */
  readonly events: number;
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
const USAGE_COMPACT = '"usage":{';
const USAGE_SPACED = '"usage": {';

function readUsage(u: unknown): ChatUsage | null {
  if (typeof u !== 'object' || u === null) return null;
  const r = u as Record<string, unknown>;
  const p = r['prompt_tokens'];
  const c = r['completion_tokens'];
  if (typeof p !== 'number' || typeof c !== 'number') return null;
  return { prompt_tokens: p, completion_tokens: c, total_tokens: typeof r['total_tokens'] === 'number' ? r['total_tokens'] : p + c };
}

function countData(buf: Buffer): number {
  let n = 0;
  let i = buf.indexOf(DATA);
  while (i >= 0) {
    n++;
    i = buf.indexOf(DATA, i + 5);
  }
  return n;
}

const CONTENT = '"content":"';
const QUOTE = 0x22;

function countContent(buf: Buffer): number {
  let n = 0;
  let i = buf.indexOf(CONTENT);
  while (i >= 0) {
    // Inside a JSON string the quotes would be escaped, so this is a real `content` key; skip "".
    if (buf[i + CONTENT.length] !== QUOTE) n++;
    i = buf.indexOf(CONTENT, i + CONTENT.length);
  }
  return n;
}

function hasDone(buf: Buffer): boolean {
  let i = buf.indexOf(DONE);
  while (i >= 0) {
    if (i === 0 || buf[i - 1] === NL) return true;
    i = buf.indexOf(DONE, i + DONE.length);
  }
  return false;
}

/** Creates a rewriter for one stream. */
export function createSseRewriter(opts: SseRewriterOptions): SseRewriter {
  const rewrite = opts.from !== opts.to;
  const fromCompact = `"model":${JSON.stringify(opts.from)}`;
  const fromSpaced = `"model": ${JSON.stringify(opts.from)}`;
  const toCompact = `"model":${JSON.stringify(opts.to)}`;
  const toSpaced = `"model": ${JSON.stringify(opts.to)}`;
  let rest: Buffer | null = null;
  let sawDone = false;
  let usage: ChatUsage | null = null;
  let events = 0;
  let contentChunks = 0;

  // Once per stream: the line that carries usage is parsed, and dropped if unwanted.
  const takeUsage = (text: string, marker: string): string => {
    let from = 0;
    for (;;) {
      const at = text.indexOf(marker, from);
      if (at < 0) return text;
      const lineStart = text.lastIndexOf('\n', at) + 1;
      let lineEnd = text.indexOf('\n', at);
      if (lineEnd < 0) lineEnd = text.length;
      from = lineEnd;
      if (!text.startsWith(DATA, lineStart)) continue;
      let obj: Record<string, unknown>;
      try {
        obj = JSON.parse(text.slice(lineStart + DATA.length, lineEnd)) as Record<string, unknown>;
      } catch {
        continue;
      }
      const u = readUsage(obj['usage']);
      if (u === null) continue;
      usage = u;
      const choices = obj['choices'];
      if (opts.dropUsageChunk && Array.isArray(choices) && choices.length === 0) {
        // Drop the event: its data line and the blank line that ends it.
        let cut = lineEnd + 1;
        if (text.charCodeAt(cut) === 13) cut++;
        if (text.charCodeAt(cut) === NL) cut++;
        text = text.slice(0, lineStart) + text.slice(Math.min(cut, text.length));
        from = lineStart;
      }
    }
  };

  const processLines = (buf: Buffer): Buffer | string | null => {
    events += countData(buf);
    contentChunks += countContent(buf);
    if (!sawDone && hasDone(buf)) sawDone = true;
    const usageMarker = buf.indexOf(USAGE_COMPACT) >= 0 ? USAGE_COMPACT : buf.indexOf(USAGE_SPACED) >= 0 ? USAGE_SPACED : null;
    if (!rewrite && usageMarker === null) return buf;
    let text = buf.toString('utf8');
    if (usageMarker !== null) text = takeUsage(text, usageMarker);
    if (rewrite) {
      // JSON escapes quotes inside strings, so these patterns only match a real `model` key.
      if (text.includes(fromCompact)) text = text.replaceAll(fromCompact, () => toCompact);
      if (text.includes(fromSpaced)) text = text.replaceAll(fromSpaced, () => toSpaced);
    }
    return text.length > 0 ? text : null;
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
    get events() {
      return events;
    },
    get contentChunks() {
      return contentChunks;
    },
  };
}
