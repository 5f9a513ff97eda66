import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { DeploymentState } from '@infer/shared';
import type { CreatedAt, UpdatedAt } from './column-types.ts';

/** A tenant's dedicated deployment of a catalog entry; one per (tenant, entry). */
export interface DeploymentTable {
  id: Generated<string>;
  tenantId: string;
  entryId: string;
  state: DeploymentState;
  minReplicas: ColumnType<number, number | undefined, number>;
  maxReplicas: ColumnType<number, number | undefined, number>;
  /** 'local' | 'kubernetes' | 'external'; open text so provisioners can be added without a migration. */
  provisioner: ColumnType<string, string | undefined, string>;
  externalUrl: string | null;
  lastError: string | null;
  /** Requests per replica the autoscaler aims at; null: the entry's base concurrency x its Concurrency multiplier. */
  targetConcurrency: number | null;
  scaleToZeroAfterSeconds: ColumnType<number, number | undefined, number>;
  scaleDownDelaySeconds: ColumnType<number, number | undefined, number>;
  /** The autoscaler's latest decision (the reconciler converges the replicas to it). */
  desiredReplicas: ColumnType<number, number | undefined, number>;
  lastScaleReason: string | null;
  lastScaleAt: Date | null;
  createdAt: CreatedAt;
  updatedAt: UpdatedAt;
}

export type DeploymentRow = Selectable<DeploymentTable>;
export type NewDeploymentRow = Insertable<DeploymentTable>;
export type DeploymentUpdate = Updateable<DeploymentTable>;
