import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { RuntimeKind } from '@infer/shared';
import type { CreatedAt } from './column-types.ts';

/** `draining`: out of the routing snapshot, finishing its in-flight requests before it stops. */
export const replicaStates = ['starting', 'ready', 'draining', 'failed', 'stopped'] as const;
export type ReplicaState = (typeof replicaStates)[number];

export interface DeploymentReplicaTable {
  id: Generated<string>;
  deploymentId: string;
  url: string;
  kind: RuntimeKind;
  servedModel: string;
  state: ReplicaState;
  pid: number | null;
  port: number | null;
  readyAt: Date | null;
  drainStartedAt: Date | null;
  /** Start attempt (a replica not ready by its deadline is replaced by attempt + 1). */
  attempt: ColumnType<number, number | undefined, number>;
  createdAt: CreatedAt;
}

export type DeploymentReplicaRow = Selectable<DeploymentReplicaTable>;
export type NewDeploymentReplicaRow = Insertable<DeploymentReplicaTable>;
export type DeploymentReplicaUpdate = Updateable<DeploymentReplicaTable>;
