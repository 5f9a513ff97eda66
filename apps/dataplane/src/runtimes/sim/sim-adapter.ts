import { createOpenAICompatibleAdapter } from '../openai-compatible/openai-compatible-adapter.ts';

/** packages/runtime-sim: vLLM-shaped, `/health` is 503 while cold. */
export const simAdapter = createOpenAICompatibleAdapter('sim');
