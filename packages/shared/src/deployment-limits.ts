// The bounds of a dedicated deployment's scaling settings: the deployment service enforces them (and names
// the field), the console shows and pre-checks the same numbers. No imports: the console bundles this file.

/** Most replicas one deployment may ask for (minReplicas 0..MAX_REPLICAS, maxReplicas 1..MAX_REPLICAS). */
export const MAX_REPLICAS = 8;

/** Inclusive bounds (and defaults, where the store has one) of the autoscaling knobs. */
export const AUTOSCALING_LIMITS = Object.freeze({
  /** Requests per replica the autoscaler aims at; unset means the entry's default. */
  targetConcurrency: Object.freeze({ min: 1, max: 10_000 }),
  /** Idle time before a deployment with minReplicas 0 scales to zero. */
  scaleToZeroAfterSeconds: Object.freeze({ min: 10, max: 7 * 86_400, default: 900 }),
  /** How long load must stay low before a replica is removed. */
  scaleDownDelaySeconds: Object.freeze({ min: 0, max: 86_400, default: 60 }),
});

export type AutoscalingKnob = keyof typeof AUTOSCALING_LIMITS;
