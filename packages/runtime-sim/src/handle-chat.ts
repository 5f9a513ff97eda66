import type { IncomingMessage, ServerResponse } from 'node:http';
import { generateCompletion, promptSeed } from './generate-text.ts';
import { sendError, sendStatusError } from './http-io.ts';
import type { ResolvedSimOptions, SimFaults } from './options.ts';
import { parseChatRequest } from './parse-chat-request.ts';
import { blockHashes } from './kv-cache.ts';
import { runCompletion, type Engine } from './run-completion.ts';
import type { Scheduler } from './scheduler.ts';
import type { SimStats } from './sim-stats.ts';
import { countPromptTokens, promptTokenIds } from './tokenizer.ts';

/** What the chat handler needs from the server. */
export interface ChatContext {
  readonly options: ResolvedSimOptions;
  readonly scheduler: Scheduler;
  readonly stats: SimStats;
  readonly engine: Engine;
  readonly faults: SimFaults;
  nextId(): string;
}

/** POST /v1/chat/completions: validate, apply faults, then run the simulated generation. */
export function handleChat(ctx: ChatContext, req: IncomingMessage, res: ServerResponse, raw: Buffer): void {
  const { options, stats } = ctx;
  const parsed = parseChatRequest(raw, options.models);
  if ('code' in parsed) return sendError(res, parsed.code, parsed.message, parsed.param);

  const promptTokens = countPromptTokens(parsed.messages);
  const maxContext = options.maxContextLength;
  if (promptTokens + (parsed.maxTokens ?? 0) > maxContext || promptTokens >= maxContext) {
    const completion = parsed.maxTokens ?? 0;
    const message = `This model's maximum context length is ${maxContext} tokens. However, you requested ${promptTokens + completion} tokens (${promptTokens} in the messages, ${completion} in the completion). Please reduce the length of the messages or completion.`;
    return sendError(res, 'context_length_exceeded', message, 'messages');
  }

  const { kv } = ctx.engine;
  const completion = generateCompletion({
    seed: promptSeed(parsed.messages, parsed.seed),
    maxTokens: parsed.maxTokens,
    limit: maxContext - promptTokens,
    stop: parsed.stop,
  });
  if (kv.blocksFor(promptTokens + completion.pieces.length) > kv.totalBlocks) {
    const message = `The request needs ${promptTokens + completion.pieces.length} tokens of KV cache; this runtime has ${kv.totalBlocks * kv.blockSize}.`;
    return sendError(res, 'context_length_exceeded', message, 'messages');
  }

  const requestId = req.headers['x-request-id'];
  const id = typeof requestId === 'string' && requestId.length > 0 ? `chatcmpl-${requestId}` : ctx.nextId();
  const entry = stats.begin(id, parsed.model, promptTokens, parsed.stream);
  const faults = ctx.faults;

  const errorRate = faults.errorRate ?? (faults.errorStatus !== undefined ? 1 : 0);
  if (errorRate > 0 && Math.random() < errorRate) {
    const status = faults.errorStatus ?? 500;
    stats.fail(entry, status, 'error');
    return sendStatusError(res, status, `runtime-sim injected fault: status ${status}`);
  }
  if (faults.hang) {
    res.on('close', () => stats.abort(entry));
    return;
  }

  const slowTokenMs = faults.slowTokenMs ?? 0;
  const { scheduler } = ctx;
  runCompletion(scheduler, stats, ctx.engine, {
    res,
    entry,
    completion,
    stream: parsed.stream,
    includeUsage: parsed.includeUsage,
    created: Math.floor(Date.now() / 1000),
    ttftMs: options.ttftMs,
    // Decode steps take longer as the batch grows.
    itlMs: () => options.itlMs + slowTokenMs + options.itlPerRunningMs * Math.max(0, scheduler.running - 1),
    faults,
    blockHashes: options.prefixCaching ? blockHashes(promptTokenIds(parsed.messages), kv.blockSize) : [],
  });
}
