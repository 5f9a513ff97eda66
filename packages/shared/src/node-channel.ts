import { z } from 'zod';

/**
 * Node -> control-plane channel for serverless dedicated deployments (issue 10).
 * Both routes live under the internal block of the admin API and use its node guard.
 */

export const LOAD_REPORT_PATH = '/internal/v1/load';
export const WAKE_PATH = '/internal/v1/wake';

export const deploymentLoadSchema = z.object({
  deploymentId: z.string().min(1).max(128),
  /** Requests this node has in flight on the deployment's replicas right now. */
  inFlight: z.number().int().min(0),
  /** Requests this node holds waiting for a ready replica. */
  held: z.number().int().min(0),
});
export type DeploymentLoad = z.infer<typeof deploymentLoadSchema>;

/** One request that waited for a cold start, reported once it got its first token. */
export const coldStartSampleSchema = z.object({
  deploymentId: z.string().min(1).max(128),
  endpointId: z.string().min(1).max(128),
  /** Time the request was held before a replica took it. */
  waitMs: z.number().min(0),
  /** Time from arrival to first token (includes the wait). */
  ttftMs: z.number().min(0),
});
export type ColdStartSample = z.infer<typeof coldStartSampleSchema>;

/** `POST /internal/v1/load` -> 204. Sent about once a second by every node, also when idle. */
export const loadReportSchema = z.object({
  nodeId: z.string().min(1).max(128),
  /** ISO time the node built the report. */
  sentAt: z.iso.datetime({ offset: true }),
  deployments: z.array(deploymentLoadSchema).max(10_000),
  coldStarts: z.array(coldStartSampleSchema).max(10_000).default([]),
});
export type LoadReport = z.infer<typeof loadReportSchema>;

/** `POST /internal/v1/wake` -> 202 WakeResponse. Sent at once when a request is held with no ready replica. */
export const wakeRequestSchema = z.object({
  nodeId: z.string().min(1).max(128),
  deploymentId: z.string().min(1).max(128),
});
export type WakeRequest = z.infer<typeof wakeRequestSchema>;

export const wakeResponseSchema = z.object({
  /** The deployment's state after the wake (see `deploymentStates`). */
  state: z.string(),
});
export type WakeResponse = z.infer<typeof wakeResponseSchema>;
