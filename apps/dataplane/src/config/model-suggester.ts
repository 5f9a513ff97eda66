// "Did you mean": the published Name closest to an unknown shared `model`. Built once per snapshot (ConfigView);
// consulted only after a lookup missed, never on the success path.

/** What the suggester knows of one published shared endpoint. */
export interface SuggestableEntry {
  readonly name: string;
  readonly provider: string | null;
  /** The runtimes' own names (Hugging Face ids such as `meta-llama/Llama-3.3-70B-Instruct`). */
  readonly servedModels: readonly string[];
}

/** Returns the Name `model` most likely meant, or null when none is close. */
export type ModelSuggester = (model: string) => string | null;

/** Longer inputs are not compared letter by letter (bounded work for any request). */
const MAX_FUZZY_LENGTH = 128;
/** A model longer than this is no misspelling of a Name: not looked up at all (each '/' split costs its length). */
const MAX_SUGGEST_INPUT = 512;

/** Case, separators and dots folded away: `llama 3.3 70b instruct` meets `Llama-3.3-70B-Instruct`. */
const fold = (s: string): string => s.toLowerCase().replace(/[\s._-]+/g, '');

/** Edits allowed for a typo in a name this long (more would take `Llama-3.1-8B` for `Llama-3.3-70B`). */
const maxEdits = (length: number): number => (length <= 4 ? 1 : 2);

/** Levenshtein distance of a and b, or `limit + 1` once it must exceed `limit` (only a band of 2 * limit + 1 cells per row). */
export function boundedDistance(a: string, b: string, limit: number): number {
  const over = limit + 1;
  if (Math.abs(a.length - b.length) > limit) return over;
  let prev = new Array<number>(b.length + 1).fill(over);
  let curr = new Array<number>(b.length + 1);
  for (let j = 0; j <= Math.min(b.length, limit); j++) prev[j] = j;
  for (let i = 1; i <= a.length; i++) {
    curr.fill(over);
    if (i <= limit) curr[0] = i;
    let rowMin = curr[0]!;
    const hi = Math.min(b.length, i + limit);
    for (let j = Math.max(1, i - limit); j <= hi; j++) {
      const substitute = prev[j - 1]! + (a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1);
      const v = Math.min(substitute, prev[j]! + 1, curr[j - 1]! + 1, over);
      curr[j] = v;
      if (v < rowMin) rowMin = v;
    }
    if (rowMin > limit) return over;
    [prev, curr] = [curr, prev];
  }
  return Math.min(prev[b.length]!, over);
}

/**
 * Indexes the names a caller may have meant each entry by: its Name in any case, `<provider>/<Name>`, the served
 * (Hugging Face) ids, and the Name after any other prefix; anything else is compared by edit distance.
 */
export function createModelSuggester(entries: readonly SuggestableEntry[]): ModelSuggester {
  const byAlias = new Map<string, string>();
  const add = (alias: string, name: string): void => {
    const key = fold(alias);
    if (key !== '' && !byAlias.has(key)) byAlias.set(key, name);
  };
  for (const e of entries) add(e.name, e.name);
  for (const e of entries) {
    if (e.provider) add(`${e.provider}/${e.name}`, e.name);
    add(e.name.slice(e.name.lastIndexOf('/') + 1), e.name); // a Name holding a slash, sent without its first part
    for (const served of e.servedModels) {
      add(served, e.name);
      add(served.slice(served.lastIndexOf('/') + 1), e.name);
    }
  }
  const names = entries.map((e) => ({ name: e.name, folded: fold(e.name) }));

  return (model) => {
    if (model.length > MAX_SUGGEST_INPUT) return null;
    const folded = fold(model);
    const direct = byAlias.get(folded);
    if (direct !== undefined) return direct;
    // A missing, different or extra provider prefix (Names may hold a slash themselves: try each split).
    for (let i = model.indexOf('/'); i >= 0; i = model.indexOf('/', i + 1)) {
      const hit = byAlias.get(fold(model.slice(i + 1)));
      if (hit !== undefined) return hit;
    }
    if (folded.length === 0 || folded.length > MAX_FUZZY_LENGTH) return null;
    const tail = fold(model.slice(model.lastIndexOf('/') + 1));
    let best: string | null = null;
    let bestDistance = Number.POSITIVE_INFINITY;
    for (const n of names) {
      const limit = Math.min(maxEdits(n.folded.length), bestDistance - 1);
      if (limit < 0) break;
      const d = Math.min(boundedDistance(folded, n.folded, limit), tail === folded ? limit + 1 : boundedDistance(tail, n.folded, limit));
      if (d <= limit && d < bestDistance) {
        best = n.name;
        bestDistance = d;
      }
    }
    return best;
  };
}
