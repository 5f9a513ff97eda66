// Kubernetes answers in its own words (Status bodies, pod conditions, container waiting reasons); the
// deployment's lastError is read by operators and tenants, so each case is told plainly here, once.

interface StatusBody {
  readonly message?: string;
  readonly reason?: string;
  readonly code?: number;
}

/** An error a retry cannot fix (RBAC, an invalid manifest): the deployment should fail at once. */
export class KubernetesProvisionError extends Error {
  readonly permanent: boolean;
  constructor(message: string, permanent: boolean) {
    super(message);
    this.name = 'KubernetesProvisionError';
    this.permanent = permanent;
  }
}

function statusOf(err: unknown): { code: number | undefined; body: StatusBody } {
  const e = err as { code?: unknown; body?: unknown; statusCode?: unknown };
  const code = typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
  let body: StatusBody = {};
  if (typeof e?.body === 'string') {
    try {
      body = JSON.parse(e.body) as StatusBody;
    } catch {
      body = { message: e.body.slice(0, 300) };
    }
  } else if (e?.body && typeof e.body === 'object') body = e.body as StatusBody;
  return { code, body };
}

/** The HTTP status of a failed API call, when it got an answer. */
export const apiStatus = (err: unknown): number | undefined => statusOf(err).code;

/** Words for a failed API call: `what` says what the control plane was doing ("create the Deployment infer-..."). */
export function describeApiError(err: unknown, what: string, namespace: string): KubernetesProvisionError {
  const { code, body } = statusOf(err);
  const detail = body.message ? `: ${body.message}` : '';
  if (code === 403 && /exceeded quota/i.test(body.message ?? '')) {
    return new KubernetesProvisionError(`the namespace ${namespace} has no quota left to ${what}${detail}`, false);
  }
  if (code === 403) {
    return new KubernetesProvisionError(
      `the control plane is not allowed to ${what} in namespace ${namespace} (Kubernetes RBAC: forbidden); grant its service account that permission${detail}`,
      true,
    );
  }
  if (code === 401)
    return new KubernetesProvisionError(`the Kubernetes API refused the control plane's credentials (401 Unauthorized) while trying to ${what}`, true);
  if (code === 404) return new KubernetesProvisionError(`could not ${what}: not found (does namespace ${namespace} exist?)${detail}`, true);
  if (code === 422 || code === 400) return new KubernetesProvisionError(`Kubernetes rejected the manifest when trying to ${what} (invalid)${detail}`, true);
  if (code === 409) return new KubernetesProvisionError(`could not ${what}: another writer changed it at the same time (conflict)${detail}`, false);
  if (code !== undefined) return new KubernetesProvisionError(`could not ${what}: the Kubernetes API answered ${code}${detail}`, false);
  const msg = err instanceof Error ? err.message : String(err);
  return new KubernetesProvisionError(`could not ${what}: the Kubernetes API is unreachable (${msg})`, false);
}

interface PodLike {
  readonly metadata?: { readonly name?: string };
  readonly spec?: { readonly containers?: readonly { readonly image?: string }[] };
  readonly status?: {
    readonly conditions?: readonly { readonly type?: string; readonly status?: string; readonly reason?: string; readonly message?: string }[];
    readonly containerStatuses?: readonly {
      readonly image?: string;
      readonly restartCount?: number;
      readonly state?: {
        readonly waiting?: { readonly reason?: string; readonly message?: string };
        readonly terminated?: { readonly reason?: string; readonly exitCode?: number };
      };
      readonly lastState?: { readonly terminated?: { readonly reason?: string; readonly exitCode?: number } };
    }[];
  };
}

const IMAGE_REASONS = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull']);

/** Why a pod will not become ready without someone's help, or null while it may still get there. */
export function podProblem(pod: PodLike, gpuCount: number): string | null {
  const name = pod.metadata?.name ?? 'a pod';
  for (const c of pod.status?.containerStatuses ?? []) {
    const waiting = c.state?.waiting;
    if (waiting?.reason && IMAGE_REASONS.has(waiting.reason)) {
      const image = pod.spec?.containers?.[0]?.image ?? c.image ?? 'the image';
      return `the image ${image} could not be pulled (${waiting.reason}) for pod ${name}: check the image name and the registry credentials${waiting.message ? `; ${waiting.message}` : ''}`;
    }
    if (waiting?.reason === 'CrashLoopBackOff' || waiting?.reason === 'CreateContainerConfigError') {
      const last = c.lastState?.terminated;
      return `the runtime in pod ${name} keeps failing (${waiting.reason}${last ? `, last exit ${last.reason ?? ''} code ${last.exitCode ?? '?'}` : ''})${waiting.message ? `: ${waiting.message}` : ''}`;
    }
  }
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    const msg = scheduled.message ?? '';
    if (/nvidia\.com\/gpu/i.test(msg)) {
      return `no node has ${gpuCount} free GPU${gpuCount === 1 ? '' : 's'} (nvidia.com/gpu) for pod ${name}: add GPU nodes or free some; the scheduler said: ${msg}`;
    }
    return `pod ${name} cannot be scheduled on any node: ${msg}`;
  }
  return null;
}

interface DeploymentLike {
  readonly status?: {
    readonly conditions?: readonly { readonly type?: string; readonly status?: string; readonly reason?: string; readonly message?: string }[];
  };
}

/** A Deployment whose pods the ReplicaSet controller cannot create (quota, admission). */
export function deploymentProblem(d: DeploymentLike, namespace: string): string | null {
  const c = d.status?.conditions?.find((x) => x.type === 'ReplicaFailure' && x.status === 'True');
  if (!c) return null;
  const msg = c.message ?? c.reason ?? 'unknown reason';
  if (/exceeded quota/i.test(msg)) return `the namespace ${namespace} has no quota left for another replica (ResourceQuota): ${msg}`;
  return `Kubernetes could not create a pod (${c.reason ?? 'ReplicaFailure'}): ${msg}`;
}
