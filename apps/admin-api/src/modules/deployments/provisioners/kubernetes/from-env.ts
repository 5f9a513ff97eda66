import pino from 'pino';
import type { Db } from '../../../../db.ts';
import type { AdminEnv } from '../../../../env.ts';
import type { Provisioner } from '../provisioner.ts';
import { createKubernetesLookup } from './kubernetes-lookup.ts';
import { createKubernetesProvisioner, loadKubeConfig } from './kubernetes-provisioner.ts';

/** The Kubernetes provisioner when K8S_NAMESPACE is set (credentials: KUBECONFIG, else the pod's service account); otherwise none. */
export function kubernetesProvisionerFromEnv(env: AdminEnv, db: Db): Provisioner | undefined {
  if (!env.K8S_NAMESPACE) return undefined;
  let kubeConfig: ReturnType<typeof loadKubeConfig>;
  try {
    kubeConfig = loadKubeConfig(env.KUBECONFIG);
  } catch (err) {
    const from = env.KUBECONFIG ? `KUBECONFIG ${env.KUBECONFIG}` : 'the pod service account';
    throw new Error(
      `K8S_NAMESPACE is set but the Kubernetes credentials could not be loaded from ${from}: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  return createKubernetesProvisioner({
    kubeConfig,
    namespace: env.K8S_NAMESPACE,
    defaults: { vllmImage: env.K8S_VLLM_IMAGE, sglangImage: env.K8S_SGLANG_IMAGE, tgiImage: env.K8S_TGI_IMAGE, drainSeconds: env.K8S_DRAIN_SECONDS },
    lookup: createKubernetesLookup(db),
    address: env.K8S_REPLICA_ADDRESS,
    unschedulableGraceMs: env.K8S_UNSCHEDULABLE_GRACE_S * 1000,
    log: pino({ level: env.LOG_LEVEL, name: 'kubernetes-provisioner' }),
  });
}
