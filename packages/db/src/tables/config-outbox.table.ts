import type { Insertable, Selectable, Updateable } from 'kysely';
import type { ConfigEntityKind } from '@infer/shared';
import type { CreatedAt, NullableJson, Serial } from './column-types.ts';

export type OutboxOp = 'upsert' | 'delete';

/** Routing-state changes; `seq` is the config version the data plane follows. */
export interface ConfigOutboxTable {
  seq: Serial;
  kind: ConfigEntityKind;
  entityId: string;
  op: OutboxOp;
  payload: NullableJson;
  createdAt: CreatedAt;
}

export type ConfigOutboxRow = Selectable<ConfigOutboxTable>;
export type NewConfigOutboxRow = Insertable<ConfigOutboxTable>;
export type ConfigOutboxUpdate = Updateable<ConfigOutboxTable>;
