import { z } from 'zod';

// The spec's examples send max_tokens, stream and temperature as JSON strings; accept the
// unambiguous string forms and reject everything else with an error that names the field.
const intLike = z.union([
  z.number().int(),
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'must be an integer')
    .transform(Number),
]);
const numberLike = z.union([
  z.number(),
  z
    .string()
    .trim()
    .regex(/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/, 'must be a number')
    .transform(Number),
]);
const boolLike = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);

/** Roles OpenAI-compatible runtimes understand; anything else is the caller's mistake (a 400, not a runtime 500). */
export const CHAT_ROLES = ['system', 'user', 'assistant', 'tool', 'developer', 'function'] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

/** Roles whose message is nothing without its content (an assistant's may be null beside its tool calls). */
export const CONTENT_ROLES: ReadonlySet<string> = new Set(['system', 'user', 'developer']);

export const chatMessageSchema = z
  .looseObject({
    role: z.enum(CHAT_ROLES, { error: `must be one of ${CHAT_ROLES.join(', ')}` }),
    content: z.union([z.string(), z.array(z.unknown()), z.null()]).optional(),
  })
  .superRefine((m, ctx) => {
    // As OpenAI answers them: a 400 naming the field, not a runtime's chat template failing on them later.
    if (CONTENT_ROLES.has(m.role) && (m.content === undefined || m.content === null))
      ctx.addIssue({ code: 'custom', path: ['content'], message: `is required in a ${m.role} message` });
    if (m.role === 'tool' && typeof m['tool_call_id'] !== 'string')
      ctx.addIssue({ code: 'custom', path: ['tool_call_id'], message: 'is required in a tool message (the id of the call it answers)' });
  });
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/** The chat-completions request as the data plane accepts it; unknown fields pass through. */
export const chatRequestSchema = z.looseObject({
  model: z.string().min(1).optional(),
  messages: z.array(chatMessageSchema).min(1),
  stream: boolLike.optional(),
  max_tokens: intLike.pipe(z.number().int().min(1)).optional(),
  max_completion_tokens: intLike.pipe(z.number().int().min(1)).optional(),
  temperature: numberLike.pipe(z.number().min(0).max(2)).optional(),
  top_p: numberLike.pipe(z.number().min(0).max(1)).optional(),
  n: intLike.pipe(z.number().int().min(1).max(16)).optional(),
  seed: intLike.optional(),
  stop: z
    .union([z.string(), z.array(z.string()).max(4)])
    .nullable()
    .optional(),
  stream_options: z.looseObject({ include_usage: boolLike.optional() }).nullable().optional(),
});
export type ChatRequest = z.infer<typeof chatRequestSchema>;

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}
