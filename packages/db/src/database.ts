import type { AdminTokenTable } from './tables/admin-token.table.ts';
import type { ApiKeyTable } from './tables/api-key.table.ts';
import type { AuditLogTable } from './tables/audit-log.table.ts';
import type { AuthThrottleTable } from './tables/auth-throttle.table.ts';
import type { CatalogEntryTable } from './tables/catalog-entry.table.ts';
import type { ColdStartTable } from './tables/cold-start.table.ts';
import type { ConfigOutboxTable } from './tables/config-outbox.table.ts';
import type { DeploymentReplicaTable } from './tables/deployment-replica.table.ts';
import type { DeploymentTable } from './tables/deployment.table.ts';
import type { EndpointUpstreamTable } from './tables/endpoint-upstream.table.ts';
import type { InvitationTable } from './tables/invitation.table.ts';
import type { MembershipTable } from './tables/membership.table.ts';
import type { NodeLoadTable } from './tables/node-load.table.ts';
import type { ReplicaIntervalTable } from './tables/replica-interval.table.ts';
import type { NodeCredentialTable } from './tables/node-credential.table.ts';
import type { SessionTable } from './tables/session.table.ts';
import type { TenantTable } from './tables/tenant.table.ts';
import type { UsageRecordTable } from './tables/usage-record.table.ts';
import type { UserTable } from './tables/user.table.ts';

/** The whole schema as Kysely sees it: camelCase here, snake_case in SQL (CamelCasePlugin). */
export interface DB {
  tenants: TenantTable;
  users: UserTable;
  memberships: MembershipTable;
  invitations: InvitationTable;
  sessions: SessionTable;
  apiKeys: ApiKeyTable;
  adminTokens: AdminTokenTable;
  catalogEntries: CatalogEntryTable;
  endpointUpstreams: EndpointUpstreamTable;
  deployments: DeploymentTable;
  deploymentReplicas: DeploymentReplicaTable;
  configOutbox: ConfigOutboxTable;
  usageRecords: UsageRecordTable;
  auditLog: AuditLogTable;
  authThrottle: AuthThrottleTable;
  replicaIntervals: ReplicaIntervalTable;
  coldStarts: ColdStartTable;
  nodeLoads: NodeLoadTable;
  nodeCredentials: NodeCredentialTable;
}
