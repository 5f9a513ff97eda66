import type { Insertable, Selectable } from 'kysely';

/** A node's latest load report for one deployment (any control-plane replica may receive it). */
export interface NodeLoadTable {
  nodeId: string;
  deploymentId: string;
  inFlight: number;
  held: number;
  reportedAt: Date;
}

export type NodeLoadRow = Selectable<NodeLoadTable>;
export type NewNodeLoadRow = Insertable<NodeLoadTable>;
