export { createDb, DataDirInUseError } from './create-db.ts';
export type { CreateDbOptions, Database, DatabaseKind } from './create-db.ts';
export { migrateDown, migrateToLatest, migrationNames } from './migrate.ts';
export { createPGliteDialect } from './pglite-dialect.ts';
export type { DB } from './database.ts';

export type {
  CreatedAt,
  JsonObject,
  JsonPrimitive,
  JsonValue,
  NullableJson,
  NullableTimestamp,
  Serial,
  TextArray,
  Timestamp,
  UpdatedAt,
} from './tables/column-types.ts';
export type { AdminTokenRow, AdminTokenTable, AdminTokenUpdate, NewAdminTokenRow } from './tables/admin-token.table.ts';
export type { ApiKeyRow, ApiKeyTable, ApiKeyUpdate, NewApiKeyRow } from './tables/api-key.table.ts';
export type { AuditLogRow, AuditLogTable, AuditLogUpdate, NewAuditLogRow } from './tables/audit-log.table.ts';
export type { CatalogEntryRow, CatalogEntryTable, CatalogEntryUpdate, NewCatalogEntryRow } from './tables/catalog-entry.table.ts';
export type { ConfigOutboxRow, ConfigOutboxTable, ConfigOutboxUpdate, NewConfigOutboxRow, OutboxOp } from './tables/config-outbox.table.ts';
export { replicaStates } from './tables/deployment-replica.table.ts';
export { replicaPhases } from './tables/replica-interval.table.ts';
export type { ReplicaIntervalRow, ReplicaIntervalTable, ReplicaPhase } from './tables/replica-interval.table.ts';
export type { ColdStartRow, ColdStartTable } from './tables/cold-start.table.ts';
export type { NodeLoadRow, NodeLoadTable } from './tables/node-load.table.ts';
export type {
  DeploymentReplicaRow,
  DeploymentReplicaTable,
  DeploymentReplicaUpdate,
  NewDeploymentReplicaRow,
  ReplicaState,
} from './tables/deployment-replica.table.ts';
export type { DeploymentRow, DeploymentTable, DeploymentUpdate, NewDeploymentRow } from './tables/deployment.table.ts';
export type { EndpointUpstreamRow, EndpointUpstreamTable, EndpointUpstreamUpdate, NewEndpointUpstreamRow } from './tables/endpoint-upstream.table.ts';
export { invitationStatuses } from './tables/invitation.table.ts';
export type { InvitationRow, InvitationStatus, InvitationTable, InvitationUpdate, NewInvitationRow } from './tables/invitation.table.ts';
export { membershipRoles } from './tables/membership.table.ts';
export type { MembershipRole, MembershipRow, MembershipTable, MembershipUpdate, NewMembershipRow } from './tables/membership.table.ts';
export type { NewSessionRow, SessionRow, SessionTable, SessionUpdate } from './tables/session.table.ts';
export type { NewTenantRow, TenantRow, TenantTable, TenantUpdate } from './tables/tenant.table.ts';
export type { NewUsageRecordRow, UsageMode, UsageRecordRow, UsageRecordTable, UsageRecordUpdate } from './tables/usage-record.table.ts';
export type { NewUserRow, UserRow, UserTable, UserUpdate } from './tables/user.table.ts';
