import { createOpenAICompatibleAdapter } from '../openai-compatible/openai-compatible-adapter.ts';

/** Text Generation Inference Messages API: validation errors are 422, usage rides on the last chunk. */
export const tgiAdapter = createOpenAICompatibleAdapter('tgi', {
  isContextLengthError: (status, message) => (status === 400 || status === 422) && /must be <=|context|too long|max_total_tokens/i.test(message),
});
