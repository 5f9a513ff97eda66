import { useId } from 'react';
import { MAX_REPLICAS, type ScalingDraft } from '../lib/autoscaling.ts';

export { DEFAULT_SCALING, scalingErrors, toAutoscaling, type ScalingDraft } from '../lib/autoscaling.ts';

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
      <p className={errors[k] ? 'field-error' : 'hint'} id={`${id}-${k}-note`}>
        {errors[k] ?? hint}
      </p>
    </div>
  );
  return (
    <div className="form-grid">
      {field('min', 'Min replicas', '0 scales to zero when idle', { min: 0, max: MAX_REPLICAS })}
      {field('max', 'Max replicas', `Up to ${MAX_REPLICAS}`, { min: 1, max: MAX_REPLICAS })}
      {field(
        'target',
        'Target concurrency',
        props.defaultTarget ? `Requests per replica; empty: default (${props.defaultTarget})` : 'Requests per replica; empty: the entry default',
        {
          min: 1,
          max: 10_000,
          placeholder: props.defaultTarget ? String(props.defaultTarget) : 'default',
        },
      )}
      {field('toZero', 'Scale to zero after (s)', 'Idle time before the last replica stops; at least 10', { min: 10, max: 7 * 86_400 })}
      {field('downDelay', 'Scale-down delay (s)', 'Wait before removing replicas', { min: 0, max: 86_400 })}
    </div>
  );
}
