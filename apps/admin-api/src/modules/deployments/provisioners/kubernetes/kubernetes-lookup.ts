import type { Db } from '../../../../db.ts';
import { isUuid } from '../../../../db.ts';
import type { KubernetesDeploymentInfo } from './kubernetes-provisioner.ts';
import { parseRuntimeConfig } from './runtime-config.ts';

/** Reads what the manifests need beyond the replica spec: entry id, GPU Count, Cold Start TTFT, Context Length and the entry's runtime configuration. */
export function createKubernetesLookup(db: Db): (deploymentId: string) => Promise<KubernetesDeploymentInfo | null> {
  return async (deploymentId) => {
    if (!isUuid(deploymentId)) return null;
    const row = await db
      .selectFrom('deployments as d')
      .innerJoin('catalogEntries as e', 'e.id', 'd.entryId')
      .select(['e.id as entryId', 'e.gpuCount', 'e.coldStartSeconds', 'e.contextLength', 'e.runtimeConfig'])
      .where('d.id', '=', deploymentId)
      .executeTakeFirst();
    if (!row) return null;
    return {
      entryId: row.entryId,
      gpuCount: row.gpuCount ?? 1,
      coldStartSeconds: row.coldStartSeconds,
      contextLength: row.contextLength,
      runtimeConfig: parseRuntimeConfig(row.runtimeConfig),
    };
  };
}
