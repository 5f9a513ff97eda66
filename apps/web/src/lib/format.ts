/** Display helpers shared by the pages. */
export type DateLike = Date | string | number | null | undefined;

export function formatDate(d: DateLike): string {
  if (d === null || d === undefined || d === '') return '—';
  const date = new Date(d);
  if (Number.isNaN(date.getTime())) return '—';
  return date.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

export const formatInt = (n: number): string => n.toLocaleString('en-US');

export function formatUsd(n: number): string {
  if (n === 0) return '$0.00';
  if (Math.abs(n) < 0.01) return `$${n.toFixed(6)}`;
  return `$${n.toFixed(2)}`;
}

/** YYYY-MM-DD of a date in UTC. */
export const isoDay = (d: Date): string => d.toISOString().slice(0, 10);
