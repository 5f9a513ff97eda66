import { createOpenAICompatibleAdapter } from '../openai-compatible/openai-compatible-adapter.ts';

/** A hosted OpenAI-compatible API: no `/health`, so probe the model list. */
export const openaiAdapter = createOpenAICompatibleAdapter('openai', { healthPath: '/v1/models' });
