import { createOpenAICompatibleAdapter } from '../openai-compatible/openai-compatible-adapter.ts';

/** vLLM's OpenAI server: `/health`, usage chunk on `include_usage`. */
export const vllmAdapter = createOpenAICompatibleAdapter('vllm');
