import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { RuntimeKind } from '@infer/shared';
import type { CreatedAt } from './column-types.ts';

/** A replica serving a catalog entry on the shared surface. */
export interface EndpointUpstreamTable {
  id: Generated<string>;
  entryId: string;
  url: string;
  kind: RuntimeKind;
  servedModel: string;
  apiKey: string | null;
  weight: ColumnType<number, number | undefined, number>;
  createdAt: CreatedAt;
}

export type EndpointUpstreamRow = Selectable<EndpointUpstreamTable>;
export type NewEndpointUpstreamRow = Insertable<EndpointUpstreamTable>;
export type EndpointUpstreamUpdate = Updateable<EndpointUpstreamTable>;
