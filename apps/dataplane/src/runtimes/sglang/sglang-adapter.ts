import { createOpenAICompatibleAdapter } from '../openai-compatible/openai-compatible-adapter.ts';

/** SGLang's OpenAI server: `/health`, usage chunk on `include_usage`. */
export const sglangAdapter = createOpenAICompatibleAdapter('sglang');
