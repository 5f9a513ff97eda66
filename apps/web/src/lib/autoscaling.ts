// The deploy and autoscaling forms' rules, checked before sending (the deployment service checks again and names the field).
// No import of the API types here: the root typecheck (no JSX) also compiles this file through its unit test.

/** What `deployments.create`/`scale` take as `autoscaling`. */
export interface Autoscaling {
  readonly targetConcurrency: number | null;
  readonly scaleToZeroAfterSeconds: number;
  readonly scaleDownDelaySeconds: number;
}

/** The autoscaling knobs as typed into a form (strings: the inputs' own values). */
export interface ScalingDraft {
  min: string;
  max: string;
  /** Empty: the entry's default (base concurrency x its Concurrency multiplier). */
  target: string;
  toZero: string;
  downDelay: string;
}

// The same bounds the deployment service enforces (it checks again and names the field).
export const MAX_REPLICAS = 8;
const LIMITS = { target: [1, 10_000], toZero: [10, 7 * 86_400], downDelay: [0, 86_400] } as const;

export function scalingErrors(d: ScalingDraft): Partial<Record<keyof ScalingDraft, string>> {
  const errors: Partial<Record<keyof ScalingDraft, string>> = {};
  const int = (s: string) => (/^\d+$/.test(s.trim()) ? Number(s.trim()) : NaN);
  const min = int(d.min);
  const max = int(d.max);
  if (!(min >= 0 && min <= MAX_REPLICAS)) errors.min = `A whole number from 0 to ${MAX_REPLICAS}`;
  if (!(max >= 1 && max <= MAX_REPLICAS)) errors.max = `A whole number from 1 to ${MAX_REPLICAS}`;
  else if (min > max) errors.min = 'Must not exceed max replicas';
  for (const k of ['target', 'toZero', 'downDelay'] as const) {
    if (k === 'target' && d.target.trim() === '') continue;
    const v = int(d[k]);
    const [lo, hi] = LIMITS[k];
    if (!(v >= lo && v <= hi)) errors[k] = `A whole number from ${lo} to ${hi.toLocaleString('en-US')}`;
  }
  return errors;
}

export function toAutoscaling(d: ScalingDraft): Autoscaling {
  return {
    targetConcurrency: d.target.trim() === '' ? null : Number(d.target),
    scaleToZeroAfterSeconds: Number(d.toZero),
    scaleDownDelaySeconds: Number(d.downDelay),
  };
}

export const DEFAULT_SCALING: ScalingDraft = { min: '0', max: '1', target: '', toZero: '900', downDelay: '60' };
