import { useId } from 'react';
import type { Autoscaling } from '../api.tsx';

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
const MAX_REPLICAS = 8;
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

/** Min/max replicas and the autoscaler's knobs, laid out on one aligned grid. */
export function AutoscalingFields(props: {
  draft: ScalingDraft;
  onChange(d: ScalingDraft): void;
  errors: Partial<Record<keyof ScalingDraft, string>>;
  /** The resolved default target, shown as the placeholder. */
  defaultTarget?: number | null;
}) {
  const id = useId();
  const { draft, errors } = props;
  const field = (k: keyof ScalingDraft, label: string, hint: string, opts: { min: number; max: number; placeholder?: string }) => (
    <div className="field">
      <label htmlFor={`${id}-${k}`}>{label}</label>
      <input
        id={`${id}-${k}`}
        type="number"
        inputMode="numeric"
        min={opts.min}
        max={opts.max}
        step={1}
        value={draft[k]}
        placeholder={opts.placeholder}
        aria-invalid={errors[k] ? true : undefined}
        aria-describedby={`${id}-${k}-note`}
        onChange={(e) => props.onChange({ ...draft, [k]: e.target.value })}
      />
      <p className={errors[k] ? 'field-error' : 'hint'} id={`${id}-${k}-note`}>{errors[k] ?? hint}</p>
    </div>
  );
  return (
    <div className="form-grid">
      {field('min', 'Min replicas', '0 scales to zero when idle', { min: 0, max: MAX_REPLICAS })}
      {field('max', 'Max replicas', `Up to ${MAX_REPLICAS}`, { min: 1, max: MAX_REPLICAS })}
      {field('target', 'Target concurrency', props.defaultTarget ? `Requests per replica; empty: default (${props.defaultTarget})` : 'Requests per replica; empty: the entry default', {
        min: 1, max: 10_000, placeholder: props.defaultTarget ? String(props.defaultTarget) : 'default',
      })}
      {field('toZero', 'Scale to zero after (s)', 'Idle time before the last replica stops; at least 10', { min: 10, max: 7 * 86_400 })}
      {field('downDelay', 'Scale-down delay (s)', 'Wait before removing replicas', { min: 0, max: 86_400 })}
    </div>
  );
}
