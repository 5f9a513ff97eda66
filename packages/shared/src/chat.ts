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
    // One way to match each digit (`\d+\.?\d*` split a run of digits every way: quadratic on "111...1x").
    .regex(/^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$/, 'must be a number')
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

/** The tool kinds OpenAI's API knows (runtimes serve `function`; another is a 400 from them, passed through). */
export const TOOL_TYPES = ['function', 'custom'] as const;

/** A tool the model may call: an object with a `type`; a `function` tool names its function. */
const toolSchema = z.looseObject({ type: z.enum(TOOL_TYPES, { error: "must be 'function' or 'custom'" }) }).superRefine((t, ctx) => {
  if (t.type !== 'function') return;
  const f = t['function'];
  const name = typeof f === 'object' && f !== null && !Array.isArray(f) ? (f as Record<string, unknown>)['name'] : undefined;
  if (typeof name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(name))
    ctx.addIssue({ code: 'custom', path: ['function', 'name'], message: 'must be 1 to 64 letters, digits, underscores or dashes' });
});

/** The response format kinds OpenAI's API knows; `json_schema` carries a named schema. */
export const RESPONSE_FORMAT_TYPES = ['text', 'json_object', 'json_schema'] as const;

const responseFormatSchema = z
  .looseObject({ type: z.enum(RESPONSE_FORMAT_TYPES, { error: `must be one of ${RESPONSE_FORMAT_TYPES.join(', ')}` }) })
  .superRefine((r, ctx) => {
    if (r.type !== 'json_schema') return;
    const js = r['json_schema'];
    if (typeof js !== 'object' || js === null || Array.isArray(js) || typeof (js as Record<string, unknown>)['name'] !== 'string')
      ctx.addIssue({ code: 'custom', path: ['json_schema'], message: "must be an object with a 'name' (and its 'schema') when type is json_schema" });
  });

/** A `logit_bias` key: a token id. */
export const LOGIT_BIAS_KEY = /^\d{1,9}$/;

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
    .union([z.string(), z.array(z.string()).max(4)], { error: 'must be a string or an array of at most 4 strings' })
    .nullable()
    .optional(),
  stream_options: z.looseObject({ include_usage: boolLike.optional() }).nullable().optional(),
  presence_penalty: numberLike.pipe(z.number().min(-2).max(2)).optional(),
  frequency_penalty: numberLike.pipe(z.number().min(-2).max(2)).optional(),
  tools: z.array(toolSchema).min(1, 'must not be empty: leave tools out instead').max(128).optional(),
  tool_choice: z
    .unknown()
    .refine(
      (v) =>
        v === undefined ||
        v === 'none' ||
        v === 'auto' ||
        v === 'required' ||
        (typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as Record<string, unknown>)['type'] === 'string'),
      { message: "must be 'none', 'auto', 'required' or an object naming a tool" },
    )
    .optional(),
  response_format: responseFormatSchema.optional(),
  logprobs: z.boolean({ error: 'must be a boolean (true or false)' }).optional(),
  top_logprobs: intLike.pipe(z.number().int().min(0).max(20)).optional(),
  user: z.string({ error: 'must be a string' }).optional(),
  logit_bias: z
    .record(
      z.string().regex(LOGIT_BIAS_KEY, 'keys must be token ids (non-negative integers)'),
      z.number({ error: 'must map token ids to numbers' }).min(-100, 'must be between -100 and 100').max(100, 'must be between -100 and 100'),
      { error: 'must be an object mapping token ids to numbers from -100 to 100' },
    )
    .optional(),
});
export type ChatRequest = z.infer<typeof chatRequestSchema>;

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}
