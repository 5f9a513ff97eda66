import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt, NullableJson, TextArray, UpdatedAt } from './column-types.ts';

/** A published endpoint (spec 2.1), stored structured; string forms are rendered at the edges. */
export interface CatalogEntryTable {
  id: Generated<string>;
  /** Exact model identifier, the value sent as `model`. */
  name: string;
  provider: string | null;
  parameterSizeB: number | null;
  gpuCount: number | null;
  contextLength: number | null;
  concurrency: number | null;
  coldStartSeconds: number | null;
  /** USD per million input tokens. */
  priceInputPerM: number | null;
  /** USD per million output tokens. */
  priceOutputPerM: number | null;
  /** USD per GPU-hour of a dedicated replica. */
  dedicatedPricePerGpuHour: ColumnType<number | null, number | null | undefined, number | null>;
  useCases: TextArray;
  summary: string | null;
  detailedIntro: string | null;
  tags: TextArray;
  offeredShared: ColumnType<boolean, boolean | undefined, boolean>;
  offeredDedicated: ColumnType<boolean, boolean | undefined, boolean>;
  published: ColumnType<boolean, boolean | undefined, boolean>;
  /** How dedicated replicas run on Kubernetes (runtime, image, model source, extra args); null: defaults. */
  runtimeConfig: NullableJson;
  createdAt: CreatedAt;
  updatedAt: UpdatedAt;
}

export type CatalogEntryRow = Selectable<CatalogEntryTable>;
export type NewCatalogEntryRow = Insertable<CatalogEntryTable>;
export type CatalogEntryUpdate = Updateable<CatalogEntryTable>;
