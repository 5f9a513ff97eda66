// Cold starts of one deployment as its tenant sees them (the console's deployment page): each request
// that waited for a replica, with the wait and the time to first token the node measured.
import type { Db } from '../../db.ts';
import { notFound } from '../../errors.ts';
import { requireTenantRole } from '../access/access.ts';
import type { Principal } from '../access/principal.ts';
import { findTenantDeployment } from './deployment-store.ts';
import { observedColdStart, type ObservedColdStart } from './node-load.ts';

export interface ColdStartView {
  readonly recordedAt: Date;
  readonly waitMs: number;
  readonly ttftMs: number;
}

export interface DeploymentColdStarts {
  /** The latest samples of this deployment, newest first. */
  readonly recent: readonly ColdStartView[];
  /** p50/p95 over the entry's deployments (the figure shown beside the stated Cold Start TTFT). */
  readonly entry: ObservedColdStart;
  readonly statedSeconds: number | null;
}

/** The latest cold starts of one of the tenant's deployments (members); another tenant's is "not found". */
export async function listDeploymentColdStarts(
  db: Db,
  principal: Principal,
  ref: { readonly tenantId: string; readonly deploymentId: string; readonly limit?: number },
): Promise<DeploymentColdStarts> {
  requireTenantRole(principal, ref.tenantId, 'member');
  const d = await findTenantDeployment(db, ref.tenantId, ref.deploymentId);
  if (!d) throw notFound('deployment');
  const recent = await db
    .selectFrom('coldStarts')
    .select(['recordedAt', 'waitMs', 'ttftMs'])
    .where('deploymentId', '=', d.id)
    .orderBy('recordedAt', 'desc')
    .limit(Math.min(Math.max(ref.limit ?? 20, 1), 100))
    .execute();
  return { recent, entry: await observedColdStart(db, d.entryId), statedSeconds: d.coldStartSeconds };
}
