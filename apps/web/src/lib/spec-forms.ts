/** Spec 2.1 string forms the admin editor accepts ("70B", "2x", "5 sec"); empty means "not set". */
export interface ParsedForm {
  readonly value: number | null;
  readonly error: string | null;
}

function parseForm(input: string, re: RegExp, example: string, label: string): ParsedForm {
  const v = input.trim();
  if (v === '') return { value: null, error: null };
  const m = re.exec(v);
  if (!m?.[1]) return { value: null, error: `${label} must look like "${example}"` };
  return { value: Number(m[1]), error: null };
}

export const parseParameterSize = (s: string): ParsedForm => parseForm(s, /^(\d+(?:\.\d+)?)B$/, '70B', 'Parameter Size');
export const parseConcurrency = (s: string): ParsedForm => parseForm(s, /^(\d+(?:\.\d+)?)x$/, '2x', 'Concurrency');
export const parseColdStart = (s: string): ParsedForm => parseForm(s, /^(\d+(?:\.\d+)?) sec$/, '5 sec', 'Cold Start TTFT');

/** A non-negative integer field (GPU Count, Context Length); empty means not set. */
export function parseCount(s: string, label: string): ParsedForm {
  const v = s.trim();
  if (v === '') return { value: null, error: null };
  if (!/^\d+$/.test(v)) return { value: null, error: `${label} must be a whole number` };
  return { value: Number(v), error: null };
}

/** A price per million tokens in dollars; empty means not set. */
export function parsePrice(s: string, label: string): ParsedForm {
  const v = s.trim().replace(/^\$/, '');
  if (v === '') return { value: null, error: null };
  if (!/^\d+(?:\.\d+)?$/.test(v)) return { value: null, error: `${label} must be a number of dollars, like 0.60` };
  return { value: Number(v), error: null };
}

/** "a, b ,c" -> ["a", "b", "c"]. */
export const parseList = (s: string): string[] =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x.length > 0);

const trimNum = (n: number): string => (Number.isInteger(n) ? String(n) : String(Number(n.toFixed(4))));
export const formatParameterSize = (n: number | null): string => (n == null ? '' : `${trimNum(n)}B`);
export const formatConcurrency = (n: number | null): string => (n == null ? '' : `${trimNum(n)}x`);
export const formatColdStart = (n: number | null): string => (n == null ? '' : `${trimNum(n)} sec`);
