import { createOpenAICompatibleAdapter } from '../openai-compatible/openai-compatible-adapter.ts';

/** Ollama's OpenAI compatibility layer: health on `/api/version`. */
export const ollamaAdapter = createOpenAICompatibleAdapter('ollama', { healthPath: '/api/version' });
