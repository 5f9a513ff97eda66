import { z } from 'zod';

export const usageRecordSchema = z.object({
  requestId: z.string().min(1).max(128),
  tenantId: z.string(),
  keyId: z.string(),
  endpointId: z.string(),
  deploymentId: z.string().nullable(),
  mode: z.enum(['shared', 'dedicated']),
  model: z.string(),
  promptTokens: z.number().int().min(0),
  completionTokens: z.number().int().min(0),
  /** True when the runtime reported no usage and the data plane estimated it. */
  estimated: z.boolean(),
  status: z.number().int(),
  ttftMs: z.number().nullable(),
  latencyMs: z.number(),
  /** ISO time the request arrived. */
  startedAt: z.string(),
});
export type UsageRecord = z.infer<typeof usageRecordSchema>;

export const usageBatchSchema = z.object({ records: z.array(usageRecordSchema).max(5000) });
export type UsageBatch = z.infer<typeof usageBatchSchema>;
