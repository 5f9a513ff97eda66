import { KubeConfig } from '@kubernetes/client-node';
import { FakeApiServer, type FakeApiServerOptions } from './fake-apiserver.ts';
import { FakeKubelet, type FakeKubeletOptions } from './fake-kubelet.ts';

/** JSON as tests read it: any property chain, checked by the assertions rather than the compiler. */

export type Tree = any;

/** The runtime container of a stored Deployment. */
export function runtimeContainer(deployment: unknown): Tree {
  const c = (deployment as Tree)?.spec?.template?.spec?.containers?.[0];
  if (!c) throw new Error('no container');
  return c;
}

export interface FakeCluster {
  readonly api: FakeApiServer;
  readonly kubelet: FakeKubelet;
  readonly url: string;
  /** A kubeconfig for the fake (bearer token, plain HTTP). */
  kubeConfig(): KubeConfig;
  close(): Promise<void>;
}

/** The fake API server and its simulated controllers/kubelet, listening on a random port. */
export async function startFakeCluster(opts: FakeApiServerOptions & { kubelet?: FakeKubeletOptions } = {}): Promise<FakeCluster> {
  const api = new FakeApiServer(opts);
  const kubelet = new FakeKubelet(api, opts.kubelet);
  const url = await api.listen();
  return {
    api,
    kubelet,
    url,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
        users: [{ name: 'control-plane', token: 'fake-token' }],
        contexts: [{ name: 'fake', cluster: 'fake', user: 'control-plane', namespace: 'default' }],
        currentContext: 'fake',
      });
      return kc;
    },
    async close() {
      await kubelet.close();
      await api.close();
    },
  };
}

/** Resolves when `check` returns truthy (polling a condition, never a fixed sleep); rejects after `ms`. */
export async function until<T>(check: () => T | Promise<T>, ms = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
