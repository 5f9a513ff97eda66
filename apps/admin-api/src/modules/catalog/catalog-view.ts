import { formatColdStart, formatConcurrency, formatGpuHourPrice, formatParameterSize, formatSummary, formatTokenPrice, formatUseCases } from '@infer/shared';
import type { CatalogEntry, CatalogListEntry } from './catalog.service.ts';

/** A catalog entry as the console and APIs show it: spec 2.1 string forms beside structured values. */
export interface CatalogView {
  id: string;
  /** Exact model identifier (the `model` value). */
  name: string;
  provider: string;
  /** "<n>B" or "". */
  parameterSize: string;
  parameterSizeB: number | null;
  gpuCount: number | null;
  contextLength: number | null;
  /** "<n>x" or "". */
  concurrency: string;
  concurrencyMultiplier: number | null;
  /** "<n> sec" or "". */
  coldStartTtft: string;
  coldStartSeconds: number | null;
  tokenPrice: string;
  priceInputPerM: number | null;
  priceOutputPerM: number | null;
  /** "$<n> per GPU-hour" or "". */
  dedicatedPrice: string;
  dedicatedPricePerGpuHour: number | null;
  /** Comma-separated labels. */
  recommendedUseCases: string;
  useCases: string[];
  /** The entry's summary, or the fixed default text. */
  summary: string;
  detailedIntro: string;
  tags: string[];
  offeredShared: boolean;
  offeredDedicated: boolean;
  published: boolean;
  updatedAt: string;
}

/** An entry as lists show it: all but the detailed intro (an entry's own page shows it). */
export type CatalogListView = Omit<CatalogView, 'detailedIntro'>;

export function toCatalogView(entry: CatalogEntry): CatalogView {
  return { ...toCatalogListView(entry), detailedIntro: entry.detailedIntro ?? '' };
}

export function toCatalogListView(entry: CatalogListEntry): CatalogListView {
  return {
    id: entry.id,
    name: entry.name,
    provider: entry.provider ?? '',
    parameterSize: formatParameterSize(entry.parameterSizeB),
    parameterSizeB: entry.parameterSizeB,
    gpuCount: entry.gpuCount,
    contextLength: entry.contextLength,
    concurrency: formatConcurrency(entry.concurrency),
    concurrencyMultiplier: entry.concurrency,
    coldStartTtft: formatColdStart(entry.coldStartSeconds),
    coldStartSeconds: entry.coldStartSeconds,
    tokenPrice: formatTokenPrice(entry.priceInputPerM, entry.priceOutputPerM),
    priceInputPerM: entry.priceInputPerM,
    priceOutputPerM: entry.priceOutputPerM,
    dedicatedPrice: formatGpuHourPrice(entry.dedicatedPricePerGpuHour),
    dedicatedPricePerGpuHour: entry.dedicatedPricePerGpuHour,
    recommendedUseCases: formatUseCases(entry.useCases),
    useCases: [...entry.useCases],
    summary: formatSummary(entry.summary),
    tags: [...entry.tags],
    offeredShared: entry.offeredShared,
    offeredDedicated: entry.offeredDedicated,
    published: entry.published,
    updatedAt: new Date(entry.updatedAt).toISOString(),
  };
}
