import type { ColumnType, Insertable, Selectable, Updateable } from 'kysely';
import type { CreatedAt, Timestamp } from './column-types.ts';

export type UsageMode = 'shared' | 'dedicated';

/** One request's usage; no foreign keys so usage is never lost when other rows change. */
export interface UsageRecordTable {
  requestId: string;
  tenantId: string;
  keyId: string | null;
  entryId: string | null;
  deploymentId: string | null;
  mode: UsageMode;
  model: string;
  promptTokens: number;
  completionTokens: number;
  estimated: ColumnType<boolean, boolean | undefined, boolean>;
  status: number;
  ttftMs: number | null;
  latencyMs: number;
  costUsd: ColumnType<number, number | undefined, number>;
  startedAt: Timestamp;
  receivedAt: CreatedAt;
}

export type UsageRecordRow = Selectable<UsageRecordTable>;
export type NewUsageRecordRow = Insertable<UsageRecordTable>;
export type UsageRecordUpdate = Updateable<UsageRecordTable>;
