import { z } from 'zod';

/** Runtimes a catalog entry can run on Kubernetes; each serves an OpenAI-compatible API with `/health`. */
export const kubernetesRuntimes = ['vllm', 'sglang', 'tgi'] as const;
export type KubernetesRuntime = (typeof kubernetesRuntimes)[number];

const argPattern = /^[\x21-\x7e][\x20-\x7e]*$/;

/**
 * A catalog entry's `runtimeConfig` (set by platform admins): how its dedicated replicas run on
 * Kubernetes. Every field is optional; the provisioner's defaults fill the rest.
 */
export const runtimeConfigSchema = z
  .object({
    runtime: z.enum(kubernetesRuntimes).optional(),
    /** Container image (default per runtime; vLLM's from K8S_VLLM_IMAGE). */
    image: z
      .string()
      .trim()
      .min(1)
      .max(512)
      .regex(/^[^\s]+$/, 'image must not contain spaces')
      .optional(),
    /** What the runtime loads: a Hugging Face repo id, a path on a mounted volume, or a URI the runtime understands (default: the entry's name). */
    modelSource: z.string().trim().min(1).max(512).optional(),
    /** Extra command-line arguments appended after the platform's own. */
    extraArgs: z.array(z.string().max(512).regex(argPattern, 'each extra argument must be printable ASCII')).max(64).optional(),
    /** Plain environment variables (no secrets: use `secretEnv`). */
    env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are letters, digits and _'), z.string().max(4096)).optional(),
    /** Environment variables read from Secrets in the namespace, e.g. `{ "HF_TOKEN": { "secret": "hf", "key": "token" } }`. */
    secretEnv: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are letters, digits and _'),
        z.object({
          secret: z
            .string()
            .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'secret must be a Kubernetes object name')
            .max(253),
          key: z.string().min(1).max(253),
        }),
      )
      .optional(),
    /** Port the runtime listens on inside the pod (default 8000). */
    port: z.number().int().min(1).max(65535).optional(),
    /** Size of the shared-memory volume at /dev/shm (a Kubernetes quantity, default 16Gi). */
    shmSize: z
      .string()
      .regex(/^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$/, 'shmSize must be a quantity like 16Gi')
      .optional(),
    /** Extra CPU/memory requests, e.g. `{ "cpu": "8", "memory": "64Gi" }`. */
    resources: z
      .object({
        cpu: z
          .string()
          .regex(/^[0-9]+(\.[0-9]+)?m?$/)
          .optional(),
        memory: z
          .string()
          .regex(/^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$/)
          .optional(),
      })
      .optional(),
    /** Node selector, e.g. `{ "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" }`. */
    nodeSelector: z.record(z.string().max(317), z.string().max(63)).optional(),
  })
  .strict();

export type RuntimeConfig = z.infer<typeof runtimeConfigSchema>;

/** Reads a stored value leniently: a malformed row counts as "no configuration" rather than breaking deploys. */
export function parseRuntimeConfig(value: unknown): RuntimeConfig {
  const parsed = runtimeConfigSchema.safeParse(value ?? {});
  return parsed.success ? parsed.data : {};
}
