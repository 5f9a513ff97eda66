import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

/** A request that waited for a cold start, as a node reported it. */
export interface ColdStartTable {
  id: Generated<number>;
  deploymentId: string;
  entryId: string;
  nodeId: string;
  waitMs: number;
  ttftMs: number;
  recordedAt: ColumnType<Date, Date | undefined, Date>;
}

export type ColdStartRow = Selectable<ColdStartTable>;
export type NewColdStartRow = Insertable<ColdStartTable>;
