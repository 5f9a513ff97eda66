import type { RuntimeKind } from '@infer/shared';
import type { KubernetesRuntime, RuntimeConfig } from './runtime-config.ts';

/** The field manager every write of the control plane uses (server-side apply and the scale subresource). */
export const FIELD_MANAGER = 'infer-control-plane';
export const LABELS = Object.freeze({
  managedBy: 'app.kubernetes.io/managed-by',
  tenant: 'infer.dev/tenant-id',
  entry: 'infer.dev/entry-id',
  deployment: 'infer.dev/deployment-id',
});
/** Selects exactly the objects this control plane owns. */
export const OWNED_SELECTOR = `${LABELS.managedBy}=${FIELD_MANAGER}`;
/** Kubernetes' own hint to the ReplicaSet controller about which pod to remove first on scale-down. */
export const POD_DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';

export interface RuntimeDefaults {
  readonly vllmImage: string;
  readonly sglangImage: string;
  readonly tgiImage: string;
  /** Seconds a stopping pod keeps serving requests already in flight (preStop sleep + the runtime's own drain). */
  readonly drainSeconds: number;
}

export interface ManifestInput {
  readonly namespace: string;
  readonly deploymentId: string;
  readonly tenantId: string;
  readonly entryId: string;
  readonly servedModel: string;
  readonly entryName: string;
  readonly gpuCount: number;
  readonly coldStartSeconds: number | null;
  /** The catalog entry's Context Length: the window the runtime is started with (the data plane admits prompts up to it). */
  readonly contextLength?: number | null;
  readonly config: RuntimeConfig;
}

export interface Manifests {
  readonly deployment: Record<string, unknown>;
  readonly service: Record<string, unknown>;
  readonly port: number;
  readonly runtimeKind: RuntimeKind;
}

/** DNS-1035 label (Service names need a leading letter): `infer-<deployment uuid>`. */
export const objectName = (deploymentId: string): string => `infer-${deploymentId.toLowerCase()}`;

/**
 * The runtime's context window from the catalog's Context Length (vLLM `--max-model-len`, SGLang `--context-length`,
 * TGI `--max-input-tokens`/`--max-total-tokens`), so that it takes what the data plane admits and sizes its KV cache
 * for that; left out when the entry has none, or when the operator's extraArgs set it already (TGI refuses a flag twice).
 */
function windowArgs(runtime: KubernetesRuntime, contextLength: number | null | undefined, extra: readonly string[]): string[] {
  if (!contextLength || contextLength < 2) return [];
  const given = (flag: string): boolean => extra.some((a) => a === flag || a.startsWith(`${flag}=`));
  const n = String(contextLength);
  switch (runtime) {
    case 'vllm':
      return given('--max-model-len') ? [] : ['--max-model-len', n];
    case 'sglang':
      return given('--context-length') ? [] : ['--context-length', n];
    case 'tgi':
      return given('--max-total-tokens') || given('--max-input-tokens') ? [] : ['--max-input-tokens', String(contextLength - 1), '--max-total-tokens', n];
  }
}

function runtimeArgs(runtime: KubernetesRuntime, m: ManifestInput, port: number): { command?: string[]; args: string[] } {
  const model = m.config.modelSource ?? m.entryName;
  const gpus = String(m.gpuCount);
  const extra = m.config.extraArgs ?? [];
  const window = windowArgs(runtime, m.contextLength, extra);
  switch (runtime) {
    case 'vllm':
      // The image's entrypoint is `vllm serve`-equivalent (api_server); args only.
      return {
        args: [
          '--model',
          model,
          '--served-model-name',
          m.servedModel,
          '--tensor-parallel-size',
          gpus,
          '--host',
          '0.0.0.0',
          '--port',
          String(port),
          ...window,
          ...extra,
        ],
      };
    case 'sglang':
      return {
        command: ['python3', '-m', 'sglang.launch_server'],
        args: ['--model-path', model, '--served-model-name', m.servedModel, '--tp', gpus, '--host', '0.0.0.0', '--port', String(port), ...window, ...extra],
      };
    case 'tgi':
      return { args: ['--model-id', model, '--num-shard', gpus, '--hostname', '0.0.0.0', '--port', String(port), ...window, ...extra] };
  }
}

/**
 * Startup probe budget: model loading can take many times the stated cold start (download, weights to
 * GPU, CUDA graphs); at least 10 minutes, at most an hour, three times the Cold Start TTFT in between.
 */
export function startupSeconds(coldStartSeconds: number | null): number {
  return Math.min(3600, Math.max(600, Math.ceil((coldStartSeconds ?? 0) * 3)));
}

/** The Deployment and Service of one dedicated deployment, as applied (server-side apply, no status, no replicas). */
export function buildManifests(m: ManifestInput, defaults: RuntimeDefaults): Manifests {
  const runtime = m.config.runtime ?? 'vllm';
  const image = m.config.image ?? (runtime === 'vllm' ? defaults.vllmImage : runtime === 'sglang' ? defaults.sglangImage : defaults.tgiImage);
  const port = m.config.port ?? 8000;
  const name = objectName(m.deploymentId);
  const labels = { [LABELS.managedBy]: FIELD_MANAGER, [LABELS.tenant]: m.tenantId, [LABELS.entry]: m.entryId, [LABELS.deployment]: m.deploymentId };
  const selector = { [LABELS.deployment]: m.deploymentId };
  const { command, args } = runtimeArgs(runtime, m, port);
  const probe = (periodSeconds: number, failureThreshold: number) => ({
    httpGet: { path: '/health', port: 'http' },
    periodSeconds,
    timeoutSeconds: 5,
    failureThreshold,
  });
  const periods = 10;
  const env = [
    ...Object.entries(m.config.env ?? {}).map(([n, value]) => ({ name: n, value })),
    ...Object.entries(m.config.secretEnv ?? {}).map(([n, ref]) => ({ name: n, valueFrom: { secretKeyRef: { name: ref.secret, key: ref.key } } })),
  ];
  const gpu = String(m.gpuCount);
  const requests: Record<string, string> = {
    ...(m.config.resources?.cpu ? { cpu: m.config.resources.cpu } : {}),
    ...(m.config.resources?.memory ? { memory: m.config.resources.memory } : {}),
  };
  const container = {
    name: 'runtime',
    image,
    ...(command ? { command } : {}),
    args,
    ports: [{ name: 'http', containerPort: port, protocol: 'TCP' }],
    ...(env.length > 0 ? { env } : {}),
    resources: { limits: { 'nvidia.com/gpu': gpu }, ...(Object.keys(requests).length > 0 ? { requests } : {}) },
    startupProbe: probe(periods, Math.ceil(startupSeconds(m.coldStartSeconds) / periods)),
    readinessProbe: probe(5, 3),
    livenessProbe: probe(10, 6),
    // The pod leaves the Service's endpoints at once; the sleep lets every proxy notice before the
    // runtime gets SIGTERM, and the grace period below lets requests in flight finish.
    lifecycle: { preStop: { sleep: { seconds: 5 } } },
    volumeMounts: [{ name: 'dshm', mountPath: '/dev/shm' }],
  };
  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: m.namespace, labels },
    spec: {
      selector: { matchLabels: selector },
      // Two GPU pods of a small cluster cannot always coexist during a rollout: replace, don't surge.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      template: {
        metadata: { labels },
        spec: {
          containers: [container],
          volumes: [{ name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: m.config.shmSize ?? '16Gi' } }],
          terminationGracePeriodSeconds: 5 + defaults.drainSeconds,
          ...(m.config.nodeSelector ? { nodeSelector: m.config.nodeSelector } : {}),
          tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
          enableServiceLinks: false,
        },
      },
    },
  };
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: m.namespace, labels },
    spec: { type: 'ClusterIP', selector, ports: [{ name: 'http', port, targetPort: 'http', protocol: 'TCP' }] },
  };
  return { deployment, service, port, runtimeKind: runtime };
}
