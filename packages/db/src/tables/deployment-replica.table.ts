import type { Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { RuntimeKind } from '@infer/shared';
import type { CreatedAt } from './column-types.ts';

export const replicaStates = ['starting', 'ready', 'failed', 'stopped'] as const;
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
  createdAt: CreatedAt;
}

export type DeploymentReplicaRow = Selectable<DeploymentReplicaTable>;
export type NewDeploymentReplicaRow = Insertable<DeploymentReplicaTable>;
export type DeploymentReplicaUpdate = Updateable<DeploymentReplicaTable>;
