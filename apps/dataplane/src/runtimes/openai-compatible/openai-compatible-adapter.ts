import type { RuntimeKind } from '@infer/shared';
import type { RuntimeAdapter } from '../runtime-adapter.ts';

const CONTEXT_RE = /context length|context window|maximum context|too many tokens|must be <=/i;

/** The OpenAI-compatible base every adapter starts from; pass only what differs. */
export function createOpenAICompatibleAdapter(kind: RuntimeKind, overrides: Partial<Omit<RuntimeAdapter, 'kind'>> = {}): RuntimeAdapter {
  return Object.freeze({
    kind,
    chatPath: '/v1/chat/completions',
    modelsPath: '/v1/models',
    healthPath: '/health',
    streamUsage: true,
    isContextLengthError: (status: number, message: string, code: string | null) =>
      (status === 400 || status === 413 || status === 422) && (code === 'context_length_exceeded' || CONTEXT_RE.test(message)),
    ...overrides,
  });
}
