import type { ChatUsage } from '@infer/shared';
import { binaryModelField, binaryOf, objectEnd } from './binary.ts';

/**
 * Output of the rewriter: the upstream's bytes, or a "binary" string (one character per byte, to be written
 * with the `latin1` encoding) holding them with the edits spliced in. Working on the bytes this way costs no
 * UTF-8 decoding or encoding, and the writes need no byte counting.
 */
export type SseOutput = Buffer | string;

/** Rewrites an upstream SSE stream chunk by chunk: `model` back to the client's name, the usage chunk read (and dropped when unwanted). */
export interface SseRewriter {
  /** Takes one upstream chunk; returns what to send now (complete lines only). */
  push(chunk: Buffer): SseOutput | null;
  /** The trailing partial line, if the upstream ended without a newline. */
  end(): SseOutput | null;
  /** Bytes of the line still waiting for its newline. */
  readonly partialBytes: number;
  /** Forgets the line waiting for its newline (the stream is being cut: it is never sent). */
  dropPartial(): void;
  /** True once `data: [DONE]` went through. */
  readonly sawDone: boolean;
  readonly usage: ChatUsage | null;
  /** Chunks that carried non-empty generated text: content, reasoning or tool-call arguments (one token each, when the runtime reports no usage). */
  readonly contentChunks: number;
}

export interface SseRewriterOptions {
  /** The served model name to replace, and its replacement; equal means no rewrite. */
  readonly from: string;
  readonly to: string;
  /** Drop the usage-only chunk (empty `choices`) because the client did not ask for it. */
  readonly dropUsageChunk: boolean;
  /**
   * The client's form of a runtime's error event (the JSON after `data:`, an object with a top-level `error`): the
   * OpenAI error body, with a string code and a param only when it names a field. Absent: relayed as it came.
   */
  readonly errorEvent?: ((json: string, from: string, to: string) => string) | undefined;
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
const LAST_L = 0x6c; // "model"
const LAST_T = 0x74; // "content"
const LAST_R = 0x72; // "error"
const LAST_S = 0x73; // "arguments"
const LAST_G = 0x67; // "reasoning"

/**
 * The keys the rewriter acts on, found in one pass (a regex scans as fast as one indexOf, where a
 * search per key would scan the text once per key). JSON escapes quotes inside strings, so a match
 * is always a real key.
 */
const KEYS = /"(?:model|content|usage|error|arguments|reasoning_content|reasoning)":/g;

function hasDone(text: string): boolean {
  // [DONE] ends a stream: search from the end.
  let i = text.lastIndexOf(DONE);
  while (i >= 0) {
    if (i === 0 || text.charCodeAt(i - 1) === NL) return true;
    i = i === 0 ? -1 : text.lastIndexOf(DONE, i - 1);
  }
  return false;
}

interface ModelForms {
  readonly fromValue: string;
  readonly toCompact: string;
  readonly toSpaced: string;
}
/** The binary forms of each (served, client) name pair, computed once: a node sees few pairs. */
const formsCache = new Map<string, Map<string, ModelForms>>();
function modelForms(from: string, to: string): ModelForms {
  let byTo = formsCache.get(from);
  if (byTo === undefined) {
    if (formsCache.size >= 1024) formsCache.clear();
    byTo = new Map();
    formsCache.set(from, byTo);
  }
  let f = byTo.get(to);
  if (f === undefined) {
    if (byTo.size >= 1024) byTo.clear();
    f = {
      fromValue: binaryOf(JSON.stringify(from)),
      toCompact: binaryModelField(to),
      toSpaced: binaryOf(`"model": ${JSON.stringify(to)}`),
    };
    byTo.set(to, f);
  }
  return f;
}

const EMPTY_CHOICES = /"choices":\s*\[\s*\]/;

/**
 * The usage object that starts at `start` (a `{`) in the binary `text`, read from its own slice (no parse of the
 * whole event): null when it holds no token counts, undefined when it cannot be cut out cleanly (parse the line).
 */
function usageSlice(text: string, start: number, limit: number): ChatUsage | null | undefined {
  const end = objectEnd(text, start, limit);
  if (end < 0) return undefined;
  try {
    return readUsage(JSON.parse(text.slice(start, end)));
  } catch {
    return undefined;
  }
}

/** Edits of the current text: [start, end, kind] triples in order (kind 0/1: model compact/spaced, 2: drop, 3: error). */
const MODEL_COMPACT = 0;
const MODEL_SPACED = 1;
const DROP = 2;
const ERROR = 3;

/** One stream's rewriter (a class: per-stream state only, the methods are shared). */
class Rewriter implements SseRewriter {
  private readonly rewrite: boolean;
  private readonly forms: ModelForms;
  private readonly dropUsageChunk: boolean;
  private readonly errorEvent: ((json: string, from: string, to: string) => string) | undefined;
  private readonly from: string;
  private readonly to: string;
  /** Replacement lines (UTF-8) of the current text's error edits, in order. */
  private readonly errorLines: Buffer[] = [];
  private rest: Buffer | null = null;
  /** Chunks without a newline that came after `rest` (with it first), not joined yet. */
  private waiting: Buffer[] | null = null;
  partialBytes = 0;
  sawDone = false;
  usage: ChatUsage | null = null;
  contentChunks = 0;
  private readonly edits: number[] = [];

  constructor(opts: SseRewriterOptions) {
    this.rewrite = opts.from !== opts.to;
    this.forms = modelForms(opts.from, opts.to);
    this.dropUsageChunk = opts.dropUsageChunk;
    this.errorEvent = opts.errorEvent;
    this.from = opts.from;
    this.to = opts.to;
  }

  /**
   * A runtime's error event on the data line around `at`: its replacement edit, when it is one (a `data:` line whose
   * JSON has a top-level `error`; rare, so the line is parsed whole). Returns the line's end when the line was
   * replaced, or its end as a negative number when it was not (an `"error"` key inside an ordinary chunk): the
   * caller skips the line's other `"error"` keys either way, but still rewrites its model and usage when it stays.
   */
  private takeError(buf: Buffer, text: string, at: number, edits: number[]): number {
    const lineStart = text.lastIndexOf('\n', at) + 1;
    let lineEnd = text.indexOf('\n', at);
    if (lineEnd < 0) lineEnd = text.length;
    if (this.errorEvent === undefined || !text.startsWith(DATA, lineStart)) return -lineEnd;
    let end = lineEnd;
    if (text.charCodeAt(end - 1) === 13) end--;
    const json = buf.toString('utf8', lineStart + DATA.length, end).trim();
    try {
      const obj = JSON.parse(json) as unknown;
      if (typeof obj !== 'object' || obj === null || !('error' in obj) || 'choices' in obj) return -lineEnd;
    } catch {
      return -lineEnd;
    }
    while (edits.length > 0 && edits[edits.length - 3]! >= lineStart) edits.length -= 3;
    edits.push(lineStart, end, ERROR);
    this.errorLines.push(Buffer.from(`data: ${this.errorEvent(json, this.from, this.to)}`));
    return lineEnd;
  }

  push(chunk: Buffer): SseOutput | null {
    // A chunk without a newline only waits: joined once a newline comes (joining at each chunk copied a long line again
    // and again, quadratic in its length).
    if (chunk.lastIndexOf(NL) < 0) {
      if (this.rest === null) this.rest = chunk;
      else (this.waiting ??= [this.rest]).push(chunk);
      this.partialBytes += chunk.length;
      return null;
    }
    const rest = this.joinedRest();
    const buf = rest === null ? chunk : Buffer.concat([rest, chunk]);
    // Cut at the last newline: a newline byte never sits inside a multi-byte UTF-8 character.
    const nl = buf.lastIndexOf(NL);
    if (nl === buf.length - 1) {
      this.rest = null;
      this.partialBytes = 0;
      return this.processLines(buf);
    }
    this.rest = buf.subarray(nl + 1);
    this.partialBytes = this.rest.length;
    return this.processLines(buf.subarray(0, nl + 1));
  }

  dropPartial(): void {
    this.rest = null;
    this.waiting = null;
    this.partialBytes = 0;
  }

  /** The bytes after the last newline so far, as one buffer. */
  private joinedRest(): Buffer | null {
    if (this.waiting !== null) {
      this.rest = Buffer.concat(this.waiting);
      this.waiting = null;
    }
    return this.rest;
  }

  end(): SseOutput | null {
    const r = this.joinedRest();
    if (r === null) return null;
    this.rest = null;
    this.partialBytes = 0;
    return this.processLines(r);
  }

  /**
   * Reads usage from the data line [lineStart, lineEnd) whose `"usage":` value starts at `value`; returns the end of
   * the event when it is to be dropped (a usage-only event the client did not ask for), else -1.
   */
  private takeUsage(buf: Buffer, text: string, lineStart: number, lineEnd: number, value: number): number {
    if (!text.startsWith(DATA, lineStart)) return -1;
    // Usual shape: the usage object read from its own slice, `"choices":[]` found in the line.
    let u = usageSlice(text, text.charCodeAt(value) === BRACE ? value : value + 1, lineEnd);
    let emptyChoices: boolean;
    if (u !== undefined) {
      if (u === null) return -1;
      emptyChoices = EMPTY_CHOICES.test(text.slice(lineStart, lineEnd));
    } else {
      let obj: Record<string, unknown>;
      try {
        obj = JSON.parse(buf.toString('utf8', lineStart + DATA.length, lineEnd)) as Record<string, unknown>;
      } catch {
        return -1;
      }
      u = readUsage(obj['usage']);
      if (u === null) return -1;
      const choices = obj['choices'];
      emptyChoices = Array.isArray(choices) && choices.length === 0;
    }
    this.usage = u;
    if (!this.dropUsageChunk || !emptyChoices) return -1;
    // Drop the event: its data line and the blank line that ends it.
    let cut = lineEnd + 1;
    if (text.charCodeAt(cut) === 13) cut++;
    if (text.charCodeAt(cut) === NL) cut++;
    return Math.min(cut, text.length);
  }

  /** Positions in the binary view of `buf` are byte offsets; the keys are ASCII and the names are searched for as bytes. */
  private processLines(buf: Buffer): SseOutput | null {
    const text = buf.toString('latin1');
    if (!this.sawDone && hasDone(text)) this.sawDone = true;
    const { fromValue, toCompact, toSpaced } = this.forms;
    const edits = this.edits;
    edits.length = 0;
    this.errorLines.length = 0;
    let usageLineEnd = 0;
    let errorLineEnd = 0;
    let errorScanEnd = 0;
    let dropEnd = 0;
    /** The end of the last line a token was counted on. */
    let countedTo = 0;
    KEYS.lastIndex = 0;
    // `test` gives the match's end without allocating a match; the key's last letter says which key it was.
    while (KEYS.test(text)) {
      const value = KEYS.lastIndex;
      const key = text.charCodeAt(value - 3);
      const at = value - (key === LAST_T ? 10 : 8);
      if (key === LAST_R) {
        if (at >= errorLineEnd && at >= errorScanEnd && at >= dropEnd) {
          const end = this.takeError(buf, text, at, edits);
          if (end >= 0) errorLineEnd = end;
          else errorScanEnd = -end;
        }
      } else if (key === LAST_T || key === LAST_S || key === LAST_G) {
        // "content", "reasoning_content", "reasoning", a tool call's "arguments": one token per chunk that carries
        // non-empty generated text (when the runtime reports no usage), once however many of them it carries.
        if (value >= countedTo && text.charCodeAt(value) === QUOTE && text.charCodeAt(value + 1) !== QUOTE) {
          this.contentChunks++;
          const nl = text.indexOf('\n', value);
          countedTo = nl < 0 ? text.length : nl;
        }
      } else if (key === LAST_L) {
        if (!this.rewrite || at < dropEnd || at < errorLineEnd) continue;
        if (text.startsWith(fromValue, value)) edits.push(at, value + fromValue.length, MODEL_COMPACT);
        else if (text.charCodeAt(value) === SPACE && text.startsWith(fromValue, value + 1)) edits.push(at, value + 1 + fromValue.length, MODEL_SPACED);
      } else if (at >= usageLineEnd && at >= errorLineEnd) {
        const c = text.charCodeAt(value);
        if (c !== BRACE && (c !== SPACE || text.charCodeAt(value + 1) !== BRACE)) continue;
        // Once per stream (usually): the line that carries usage is read, and dropped if unwanted.
        const lineStart = text.lastIndexOf('\n', at) + 1;
        let lineEnd = text.indexOf('\n', at);
        if (lineEnd < 0) lineEnd = text.length;
        usageLineEnd = lineEnd;
        const cut = this.takeUsage(buf, text, lineStart, lineEnd, value);
        if (cut < 0) continue;
        while (edits.length > 0 && edits[edits.length - 3]! >= lineStart) edits.length -= 3;
        edits.push(lineStart, cut, DROP);
        dropEnd = cut;
      }
    }
    if (edits.length === 0) return buf;
    // The output: the input's bytes with the edits spliced in, copied into one Buffer (small ones come from Node's
    // pool): no strings pieced together and flattened again on the young heap.
    const errorLines = this.errorLines;
    let size = buf.length;
    for (let i = 0, e = 0; i < edits.length; i += 3) {
      const kind = edits[i + 2];
      size -= edits[i + 1]! - edits[i]!;
      if (kind === MODEL_COMPACT) size += toCompact.length;
      else if (kind === MODEL_SPACED) size += toSpaced.length;
      else if (kind === ERROR) size += errorLines[e++]!.length;
    }
    if (size === 0) return null;
    const out = Buffer.allocUnsafe(size);
    let pos = 0;
    let last = 0;
    for (let i = 0, e = 0; i < edits.length; i += 3) {
      const start = edits[i]!;
      pos += buf.copy(out, pos, last, start);
      const kind = edits[i + 2];
      if (kind === MODEL_COMPACT) pos += out.write(toCompact, pos, 'latin1');
      else if (kind === MODEL_SPACED) pos += out.write(toSpaced, pos, 'latin1');
      else if (kind === ERROR) pos += errorLines[e++]!.copy(out, pos);
      last = edits[i + 1]!;
    }
    buf.copy(out, pos, last);
    return out;
  }
}

/** Creates a rewriter for one stream. */
export function createSseRewriter(opts: SseRewriterOptions): SseRewriter {
  return new Rewriter(opts);
}
