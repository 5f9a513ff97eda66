import type { Generated, Insertable, Selectable } from 'kysely';

export const replicaPhases = ['boot', 'serving', 'idle'] as const;
export type ReplicaPhase = (typeof replicaPhases)[number];

/** GPU-time ledger: one row per stretch of a replica's life in one phase; `endedAt` null while open. */
export interface ReplicaIntervalTable {
  id: Generated<number>;
  replicaId: string;
  deploymentId: string;
  tenantId: string;
  entryId: string;
  gpuCount: number;
  /**
   * The entry's dedicated price when the interval opened (none: 0): past time keeps the price it ran at. Null only in
   * rows written by a control plane from before the column (a rolling deploy): priced at the entry's current price.
   */
  usdPerGpuHour: number | null;
  phase: ReplicaPhase;
  startedAt: Date;
  endedAt: Date | null;
  /** Proof of life: after a crash, an open interval is closed here (never later, so never double counted). */
  lastHeartbeatAt: Date;
}

export type ReplicaIntervalRow = Selectable<ReplicaIntervalTable>;
export type NewReplicaIntervalRow = Insertable<ReplicaIntervalTable>;
