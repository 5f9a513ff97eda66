/** Spec 2.1 string forms, rendered from and parsed to structured values. */
export const DEFAULT_SUMMARY = 'No summary has been added for this endpoint yet.';

function trimNum(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Number(n.toFixed(4)));
}

export const formatParameterSize = (billions: number | null): string => (billions == null ? '' : `${trimNum(billions)}B`);
export const formatConcurrency = (x: number | null): string => (x == null ? '' : `${trimNum(x)}x`);
export const formatColdStart = (sec: number | null): string => (sec == null ? '' : `${trimNum(sec)} sec`);
export const formatUseCases = (list: readonly string[]): string => list.join(', ');
export const formatSummary = (summary: string | null): string => (summary && summary.trim() ? summary : DEFAULT_SUMMARY);

/** Money as shown: cents at least ("$2.50", "$3.00"), finer digits only where the price has them ("$0.125"). */
const usd = (n: number): string => {
  const fine = trimNum(n);
  return fine.includes('.') && fine.split('.')[1]!.length > 2 ? fine : n.toFixed(2);
};

/** Token price as shown: "$0.20 / $0.60 per 1M tokens (input / output)" ("$0.125" kept whole), or "" when unpriced. */
export function formatTokenPrice(inputPerM: number | null, outputPerM: number | null): string {
  if (inputPerM == null && outputPerM == null) return '';
  const f = (n: number | null) => (n == null ? '—' : `$${usd(n)}`);
  return `${f(inputPerM)} / ${f(outputPerM)} per 1M tokens (input / output)`;
}

/** Dedicated price as shown: "$<n> per GPU-hour" ("$2.50 per GPU-hour"), or "" when unpriced. */
export const formatGpuHourPrice = (usdPerGpuHour: number | null): string => (usdPerGpuHour == null ? '' : `$${usd(usdPerGpuHour)} per GPU-hour`);

/** "$2.5 per GPU-hour", "2.5 / GPU-hour", "$2.5/gpu-hr" or "" (null); throws on anything else. */
export function parseGpuHourPrice(value: string): number | null {
  const v = value.trim();
  if (v === '') return null;
  const m = /^\$?\s*(\d+(?:\.\d+)?)\s*(?:(?:per|\/)\s*GPU[- ]?(?:hour|hr|h))?$/i.exec(v);
  if (!m?.[1]) throw new Error('Dedicated price must look like "$<n> per GPU-hour"');
  return Number(m[1]);
}

function parseForm(value: string, re: RegExp, field: string): number | null {
  const v = value.trim();
  if (v === '') return null;
  const m = re.exec(v);
  if (!m?.[1]) throw new Error(`${field} must look like ${re.source.replace(/\\/g, '')}`);
  return Number(m[1]);
}
export const parseParameterSize = (s: string) => parseForm(s, /^(\d+(?:\.\d+)?)\s*B$/i, 'Parameter Size');
export const parseConcurrency = (s: string) => parseForm(s, /^(\d+(?:\.\d+)?)\s*x$/i, 'Concurrency');
export const parseColdStart = (s: string) => parseForm(s, /^(\d+(?:\.\d+)?)\s*sec$/i, 'Cold Start TTFT');
export const parseUseCases = (s: string): string[] =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x.length > 0);
