import { parseColdStart, parseConcurrency, parseGpuHourPrice, parseParameterSize, parseUseCases } from '@infer/shared';
import { ServiceError } from '../../errors.ts';
import type { EntryFields } from './catalog.service.ts';

/**
 * A catalog entry as an API caller writes it: each spec 2.1 field in its string form ("70B", "2x",
 * "5 sec", "$0.20 / $0.60", "Chat, Coding") or structured, or both when they agree. `undefined`
 * leaves a field alone; `null` clears it.
 */
export interface CatalogEntryInput {
  readonly provider?: string | null;
  readonly parameterSize?: string | null;
  readonly parameterSizeBillions?: number | null;
  readonly gpuCount?: number | null;
  readonly contextLength?: number | null;
  readonly concurrency?: string | null;
  readonly concurrencyMultiplier?: number | null;
  readonly coldStartTtft?: string | null;
  readonly coldStartSeconds?: number | null;
  readonly tokenPrice?: string | null;
  readonly priceInputPerMillion?: number | null;
  readonly priceOutputPerMillion?: number | null;
  /** Dedicated price, "$<n> per GPU-hour" (or empty). */
  readonly dedicatedPrice?: string | null;
  readonly dedicatedPricePerGpuHour?: number | null;
  readonly recommendedUseCases?: string | null;
  readonly useCases?: readonly string[] | null;
  readonly summary?: string | null;
  readonly detailedIntro?: string | null;
  readonly tags?: readonly string[] | null;
  readonly offeredShared?: boolean | null;
  readonly offeredDedicated?: boolean | null;
}

const invalid = (field: string, message: string): ServiceError => new ServiceError('invalid', `${field}: ${message}`, field);

function fromForm(field: string, value: string | null | undefined, parse: (s: string) => number | null, example: string): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  try {
    return parse(value);
  } catch {
    throw invalid(field, `expected the form ${example} (or empty), got ${JSON.stringify(value.slice(0, 50))}`);
  }
}

type Range = { integer?: boolean; min: number; max: number };
type StringKey = { [K in keyof CatalogEntryInput]-?: CatalogEntryInput[K] extends string | null | undefined ? K : never }[keyof CatalogEntryInput];
type NumberKey = { [K in keyof CatalogEntryInput]-?: CatalogEntryInput[K] extends number | null | undefined ? K : never }[keyof CatalogEntryInput];

function number(field: string, value: number | null | undefined, opts: Range): number | null | undefined {
  if (value === undefined || value === null) return value;
  if (!Number.isFinite(value) || (opts.integer && !Number.isInteger(value)) || value < opts.min || value > opts.max) {
    throw invalid(field, `must be ${opts.integer ? 'an integer' : 'a number'} between ${opts.min} and ${opts.max}`);
  }
  return value;
}

/** Both forms of one field: each validated, and they must agree when both are given. */
function either(
  stringField: string,
  fromString: number | null | undefined,
  numberField: string,
  fromNumber: number | null | undefined,
): number | null | undefined {
  if (fromString !== undefined && fromNumber !== undefined && fromString !== fromNumber) {
    throw invalid(numberField, `disagrees with ${stringField}`);
  }
  return fromNumber !== undefined ? fromNumber : fromString;
}

const PRICE = /^\$?\s*(\d+(?:\.\d+)?)\s*(?:\/\s*\$?\s*(\d+(?:\.\d+)?))?(?:\s*(?:per|\/)\s*1\s*M(?:\s*tokens)?)?(?:\s*\(\s*input\s*\/\s*output\s*\))?$/i;

/** "$0.20 / $0.60 per 1M tokens (input / output)", "0.2/0.6" or "$0.50 per 1M tokens" (both sides). */
export function parseTokenPrice(value: string): { input: number; output: number } | null {
  const v = value.trim();
  if (v === '') return null;
  // The pattern's optional spaces backtrack on a long run of them: no price is this long.
  if (v.length > 200) throw invalid('tokenPrice', 'must be at most 200 characters');
  const m = PRICE.exec(v);
  if (!m?.[1]) throw invalid('tokenPrice', 'expected "$<input> / $<output> per 1M tokens" (USD per million input and output tokens) or empty');
  const input = Number(m[1]);
  return { input, output: m[2] ? Number(m[2]) : input };
}

function text(field: string, value: string | null | undefined, max: number): string | null | undefined {
  if (value === undefined || value === null) return value;
  if (value.length > max) throw invalid(field, `must be at most ${max} characters`);
  return value.trim() === '' ? null : value;
}

function labels(field: string, list: readonly string[] | null | undefined): string[] | undefined {
  if (list === undefined) return undefined;
  if (list === null) return [];
  if (list.length > 100) throw invalid(field, 'at most 100 labels');
  for (const l of list) if (l.length > 60) throw invalid(field, 'each label must be at most 60 characters');
  return [...list];
}

/** Turns API input into the service's structured fields, naming the field of the first bad value. */
export function parseEntryInput(input: CatalogEntryInput): EntryFields {
  const out: EntryFields = {};
  const set = <K extends keyof EntryFields>(key: K, value: EntryFields[K] | undefined): void => {
    if (value !== undefined) out[key] = value;
  };
  // A spec field in both its forms: the string (parsed) and the number (range-checked), agreeing when both are given.
  const formOrNumber = (stringField: StringKey, parse: (s: string) => number | null, example: string, numberField: NumberKey, range: Range) =>
    either(stringField, fromForm(stringField, input[stringField], parse, example), numberField, number(numberField, input[numberField], range));
  set('provider', text('provider', input.provider, 200));
  set('parameterSizeB', formOrNumber('parameterSize', parseParameterSize, '"<number>B", e.g. "70B"', 'parameterSizeBillions', { min: 0, max: 100_000 }));
  set('gpuCount', number('gpuCount', input.gpuCount, { integer: true, min: 0, max: 1024 }));
  set('contextLength', number('contextLength', input.contextLength, { integer: true, min: 1, max: 100_000_000 }));
  set('concurrency', formOrNumber('concurrency', parseConcurrency, '"<number>x", e.g. "2x"', 'concurrencyMultiplier', { min: 0, max: 10_000 }));
  set('coldStartSeconds', formOrNumber('coldStartTtft', parseColdStart, '"<number> sec", e.g. "5 sec"', 'coldStartSeconds', { min: 0, max: 86_400 }));

  const price = input.tokenPrice === undefined ? undefined : input.tokenPrice === null ? null : parseTokenPrice(input.tokenPrice);
  // One "$in / $out" string feeds both per-million prices; each side must agree with its number if both are given.
  const priceSide = (side: 'input' | 'output', numberField: 'priceInputPerMillion' | 'priceOutputPerMillion') =>
    either(
      'tokenPrice',
      price === undefined ? undefined : (price?.[side] ?? null),
      numberField,
      number(numberField, input[numberField], { min: 0, max: 1_000_000 }),
    );
  set('priceInputPerM', priceSide('input', 'priceInputPerMillion'));
  set('priceOutputPerM', priceSide('output', 'priceOutputPerMillion'));
  set(
    'dedicatedPricePerGpuHour',
    formOrNumber('dedicatedPrice', parseGpuHourPrice, '"$<n> per GPU-hour", e.g. "$2.50 per GPU-hour"', 'dedicatedPricePerGpuHour', { min: 0, max: 1_000_000 }),
  );

  const fromCsv = input.recommendedUseCases === undefined ? undefined : parseUseCases(input.recommendedUseCases ?? '');
  const useCases = labels('useCases', input.useCases);
  if (fromCsv !== undefined && useCases !== undefined && fromCsv.join('\n') !== useCases.map((s) => s.trim()).join('\n')) {
    throw invalid('useCases', 'disagrees with recommendedUseCases');
  }
  set('useCases', useCases ?? labels('recommendedUseCases', fromCsv));
  set('summary', text('summary', input.summary, 4000));
  set('detailedIntro', text('detailedIntro', input.detailedIntro, 50_000));
  set('tags', labels('tags', input.tags));
  if (input.offeredShared !== undefined) set('offeredShared', input.offeredShared ?? false);
  if (input.offeredDedicated !== undefined) set('offeredDedicated', input.offeredDedicated ?? false);
  return out;
}
