export { ERRORS, ApiError, errorBody } from './errors.ts';
export type { ErrorCode, OpenAIErrorBody } from './errors.ts';
export { CHAT_ROLES, CONTENT_ROLES, LOGIT_BIAS_KEY, TOOL_TYPES, chatRequestSchema, chatMessageSchema } from './chat.ts';
export type { ChatRequest, ChatMessage, ChatRole, ChatUsage } from './chat.ts';
export {
  runtimeKinds,
  deploymentStates,
  upstreamSchema,
  snapshotTenantSchema,
  snapshotKeySchema,
  snapshotEndpointSchema,
  snapshotDeploymentSchema,
  configSnapshotSchema,
  configDeltaSchema,
  applyDeltas,
  routingSchema,
} from './snapshot.ts';
export type {
  RuntimeKind,
  DeploymentState,
  SnapshotUpstream,
  SnapshotTenant,
  SnapshotKey,
  SnapshotEndpoint,
  SnapshotDeployment,
  ConfigSnapshot,
  ConfigDelta,
  ConfigEntityKind,
  SnapshotRouting,
} from './snapshot.ts';
export {
  LOAD_REPORT_PATH,
  WAKE_PATH,
  deploymentLoadSchema,
  coldStartSampleSchema,
  loadReportSchema,
  wakeRequestSchema,
  wakeResponseSchema,
} from './node-channel.ts';
export type { DeploymentLoad, ColdStartSample, LoadReport, WakeRequest, WakeResponse } from './node-channel.ts';
export { usageRecordSchema, usageBatchSchema } from './usage.ts';
export type { UsageRecord, UsageBatch } from './usage.ts';
export {
  DEFAULT_SUMMARY,
  formatParameterSize,
  formatConcurrency,
  formatColdStart,
  formatUseCases,
  formatSummary,
  formatTokenPrice,
  parseParameterSize,
  parseConcurrency,
  parseColdStart,
  parseUseCases,
  formatGpuHourPrice,
  parseGpuHourPrice,
} from './catalog-format.ts';
export { SECRET_PREFIX, generateSecret, hasValidChecksum, secretDisplayPrefix, hashSecret } from './secrets.ts';
export { isSealed, sealedKeyId, sealSecret, openSecret, deriveSecretKey } from './secret-box.ts';
export { KEY_PLACEHOLDER, requestBody, shellQuote, curlSnippet, pythonSnippet, nodeSnippet } from './snippets.ts';
export type { SnippetInput } from './snippets.ts';
export { TENANT_PLACEHOLDER, sharedBaseUrl, dedicatedBaseUrl, dedicatedModelName, endpointAddress, trimTrailingSlashes } from './public-urls.ts';
export type { PublicUrls, Surface } from './public-urls.ts';
export { MAX_REPLICAS, AUTOSCALING_LIMITS } from './deployment-limits.ts';
export type { AutoscalingKnob } from './deployment-limits.ts';
