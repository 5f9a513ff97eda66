import { contentText } from './tokenizer.ts';

// Words of at most four letters, so each is exactly one token for countTokens().
const WORDS = (
  'the of and to in is it that for as was with be by on not he this are or his from at have an but one ' +
  'they you all can had her were we some time what so up out if will into each when which more use go ' +
  'make like just than then them way only look over also back work well even new want any give most ' +
  'good very fast slow byte code data node test load run GPU core batch warm cold path safe plan line'
)
  .split(' ')
  .filter((w) => w.length <= 4);
const FIRST = WORDS.map((w) => w[0]!.toUpperCase() + w.slice(1));
const SPACED = WORDS.map((w) => ` ${w}`);
const SPACED_CAPS = FIRST.map((w) => ` ${w}`);

export type FinishReason = 'stop' | 'length';

export interface Completion {
  /** One entry per generated token, in order; their concatenation is `text`. */
  readonly pieces: readonly string[];
  readonly text: string;
  readonly finishReason: FinishReason;
}

export interface GenerateInput {
  readonly seed: number;
  /** The caller's max_tokens, or null to pick a natural length. */
  readonly maxTokens: number | null;
  /** Hard cap from the context window. */
  readonly limit: number;
  readonly stop: readonly string[];
}

/** mulberry32: a tiny, fast seeded PRNG returning floats in [0, 1). */
export function createRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The generation seed: FNV-1a of the messages, mixed with the request seed when given. */
export function promptSeed(messages: readonly { readonly role?: unknown; readonly content?: unknown }[], seed: number | null): number {
  let h = 0x811c9dc5;
  for (const m of messages) {
    const s = `${String(m.role)}\u0000${contentText(m.content)}\u0001`;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  }
  if (seed !== null) h = Math.imul(h ^ (seed | 0), 0x9e3779b1) ^ Math.floor(seed / 4294967296);
  return h >>> 0;
}

/** Generates the whole deterministic completion up front (cheap), honouring length and stop strings. */
export function generateCompletion(input: GenerateInput): Completion {
  const rng = createRng(input.seed);
  const natural = 16 + Math.floor(rng() * 49);
  const wanted = input.maxTokens ?? natural;
  const count = Math.max(0, Math.min(wanted, input.limit));
  const finishReason: FinishReason = input.maxTokens !== null || count < natural ? 'length' : 'stop';
  const stops = input.stop;
  const pieces: string[] = [];
  let text = '';
  let sentenceStart = true;
  let afterPunct = true;
  for (let i = 0; i < count; i++) {
    let piece: string;
    const r = rng();
    if (!afterPunct && r < 0.1) {
      piece = r < 0.06 ? '.' : ',';
      sentenceStart = piece === '.';
      afterPunct = true;
    } else {
      const k = Math.floor(rng() * WORDS.length);
      piece = i === 0 ? FIRST[k]! : sentenceStart ? SPACED_CAPS[k]! : SPACED[k]!;
      sentenceStart = afterPunct = false;
    }
    const before = text.length;
    text += piece;
    pieces.push(piece);
    if (stops.length > 0) {
      const cut = findStop(text, before, stops);
      if (cut >= 0) return cutAt(pieces, text, cut);
    }
  }
  return { pieces, text, finishReason };
}

// Earliest stop occurrence that ends inside the newest piece; -1 when none.
function findStop(text: string, before: number, stops: readonly string[]): number {
  let best = -1;
  for (const s of stops) {
    const i = text.indexOf(s, Math.max(0, before - s.length + 1));
    if (i >= 0 && (best < 0 || i < best)) best = i;
  }
  return best;
}

function cutAt(pieces: string[], text: string, cut: number): Completion {
  let len = text.length;
  while (pieces.length > 0 && len > cut) {
    const last = pieces.pop()!;
    len -= last.length;
    if (len < cut) {
      pieces.push(last.slice(0, cut - len));
      len = cut;
    }
  }
  return { pieces, text: text.slice(0, cut), finishReason: 'stop' };
}
