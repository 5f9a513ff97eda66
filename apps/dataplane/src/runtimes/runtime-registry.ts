import type { RuntimeKind } from '@infer/shared';
import type { RuntimeAdapter } from './runtime-adapter.ts';
import { ollamaAdapter } from './ollama/ollama-adapter.ts';
import { openaiAdapter } from './openai/openai-adapter.ts';
import { sglangAdapter } from './sglang/sglang-adapter.ts';
import { simAdapter } from './sim/sim-adapter.ts';
import { tgiAdapter } from './tgi/tgi-adapter.ts';
import { vllmAdapter } from './vllm/vllm-adapter.ts';

/** One adapter per runtime kind; a new kind in `runtimeKinds` fails the typecheck here until added. */
export const runtimeAdapters: { readonly [K in RuntimeKind]: RuntimeAdapter } = Object.freeze({
  sim: simAdapter,
  vllm: vllmAdapter,
  sglang: sglangAdapter,
  tgi: tgiAdapter,
  ollama: ollamaAdapter,
  openai: openaiAdapter,
});

export const adapterFor = (kind: RuntimeKind): RuntimeAdapter => runtimeAdapters[kind];
