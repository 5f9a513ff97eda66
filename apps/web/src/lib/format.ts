/** Display helpers shared by the pages. */
export type DateLike = Date | string | number | null | undefined;

export function formatDate(d: DateLike): string {
  if (d === null || d === undefined || d === '') return '—';
  const date = new Date(d);
  if (Number.isNaN(date.getTime())) return '—';
  return date.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

export const formatInt = (n: number): string => n.toLocaleString('en-US');

/**
 * The browser's local calendar day of `now`, YYYY-MM-DD: the earliest a date picker allows, and the day an expiry date
 * picked in it means (its end, local time). `toISOString()` gives the UTC day, which is tomorrow in the evening west
 * of UTC and yesterday after midnight east of it.
 */
export function localDay(now: Date = new Date()): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
}

const USD = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 });

/**
 * The one money format of the console, for prices and costs alike: cents at least ("$2.50"), finer digits only where
 * the amount has them, up to a millionth ("$2.125", "$0.000072": a short request's cost). Amounts finer than that
 * are not shown as "$0.00": they read "<$0.000001".
 */
export function formatUsd(n: number): string {
  if (n > 0 && n < 0.000_000_5) return '<$0.000001';
  return USD.format(n);
}

/** A token price: "$0.20 / $0.60 per 1M tokens (input / output)", or "" when unpriced. */
export function formatTokenPrice(inputPerM: number | null | undefined, outputPerM: number | null | undefined): string {
  if (inputPerM == null && outputPerM == null) return '';
  const f = (n: number | null | undefined) => (n == null ? '—' : formatUsd(n));
  return `${f(inputPerM)} / ${f(outputPerM)} per 1M tokens (input / output)`;
}

/** A dedicated price: "$2.50 per GPU-hour", or "" when unpriced. */
export const formatGpuHourPrice = (usdPerGpuHour: number | null | undefined): string =>
  usdPerGpuHour == null ? '' : `${formatUsd(usdPerGpuHour)} per GPU-hour`;

/** YYYY-MM-DD of a date in UTC. */
export const isoDay = (d: Date): string => d.toISOString().slice(0, 10);

/** Context lengths as users read them: 131072 -> "128K", 1048576 -> "1M" (binary K, as model cards write them). */
export function formatContext(n: number | null | undefined): string {
  if (n == null) return '';
  if (n >= 1_048_576 && n % 1_048_576 === 0) return `${n / 1_048_576}M`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024}K`;
  if (n >= 1000) return `${Math.round(n / 1000)}K`;
  return String(n);
}

const PROVIDER_LABELS: Readonly<Record<string, string>> = {
  meta: 'Meta',
  'meta-llama': 'Meta',
  'deepseek-ai': 'DeepSeek',
  deepseek: 'DeepSeek',
  qwen: 'Qwen',
  mistralai: 'Mistral AI',
  mistral: 'Mistral AI',
  google: 'Google',
  microsoft: 'Microsoft',
  openai: 'OpenAI',
  anthropic: 'Anthropic',
  nvidia: 'NVIDIA',
  moonshotai: 'Moonshot AI',
  'zai-org': 'Z.ai',
  ibm: 'IBM',
  cohere: 'Cohere',
};

/**
 * A provider as a label (one casing everywhere). Display only: filters and the dedicated model name
 * (`dedicatedModelName`) keep the stored provider value.
 */
export function providerLabel(provider: string | null | undefined): string {
  const p = (provider ?? '').trim();
  if (!p) return '';
  return PROVIDER_LABELS[p.toLowerCase()] ?? p.charAt(0).toUpperCase() + p.slice(1);
}

/** GPU-seconds as GPU-hours, with enough digits to see a short demo. */
export function formatGpuHours(seconds: number): string {
  const h = seconds / 3600;
  if (h === 0) return '0 GPU-h';
  if (h < 0.01) return `${h.toFixed(4)} GPU-h`;
  if (h < 10) return `${h.toFixed(2)} GPU-h`;
  return `${h.toFixed(1)} GPU-h`;
}

/** A duration in seconds, short: "45 s", "15 min", "2 h". */
export function formatSeconds(s: number): string {
  if (s < 120) return `${Math.round(s * 10) / 10} s`;
  if (s < 7200) return `${Math.round(s / 6) / 10} min`;
  return `${Math.round(s / 360) / 10} h`;
}

/** Dates in tables: one short line ("Nov 22, 14:05"; the year only when not this year). */
export function formatShortDate(d: DateLike): string {
  if (d === null || d === undefined || d === '') return '—';
  const date = new Date(d);
  if (Number.isNaN(date.getTime())) return '—';
  const sameYear = date.getFullYear() === new Date().getFullYear();
  return date.toLocaleString('en-US', {
    ...(sameYear ? {} : { year: 'numeric' }),
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    hour12: false,
  });
}

/** RFC 4180 CSV. */
export function toCsv(rows: readonly (readonly (string | number | null)[])[]): string {
  const cell = (v: string | number | null) => {
    const s = v == null ? '' : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return rows.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}
