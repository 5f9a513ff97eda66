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
  createdAt: CreatedAt;
  updatedAt: UpdatedAt;
}

export type DeploymentRow = Selectable<DeploymentTable>;
export type NewDeploymentRow = Insertable<DeploymentTable>;
export type DeploymentUpdate = Updateable<DeploymentTable>;
