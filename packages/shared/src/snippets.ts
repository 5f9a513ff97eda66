import { trimTrailingSlashes } from './public-urls.ts';

/** The integration snippets the console and GraphQL show; the same text is what a user copies and runs. */
export const KEY_PLACEHOLDER = '<INFERENCE_API_KEY>';

export interface SnippetInput {
  /** API Base URL up to and including `v1`. */
  readonly baseUrl: string;
  /** The `model` value; null leaves it out (dedicated mode allows that). */
  readonly model: string | null;
  readonly apiKey: string | null;
  readonly messages?: readonly { role: string; content: string }[];
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly stream?: boolean;
}

const DEFAULT_MESSAGES = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Say hello in one short sentence.' },
] as const;

/** The JSON body of a chat completion request. */
export function requestBody(input: SnippetInput): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (input.model !== null) body['model'] = input.model;
  body['messages'] = (input.messages ?? DEFAULT_MESSAGES).map((m) => ({ role: m.role, content: m.content }));
  body['max_tokens'] = input.maxTokens ?? 128;
  if (input.temperature !== undefined) body['temperature'] = input.temperature;
  if (input.stream) body['stream'] = true;
  return body;
}

/** Single-quotes a string for POSIX shells. */
export const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

export function curlSnippet(input: SnippetInput): string {
  const key = input.apiKey ?? KEY_PLACEHOLDER;
  const body = JSON.stringify(requestBody(input), null, 2);
  return [
    `curl ${input.stream ? '-N ' : ''}${shellQuote(`${trimTrailingSlashes(input.baseUrl)}/chat/completions`)} \\`,
    `  -H ${shellQuote(`Authorization: Bearer ${key}`)} \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d ${shellQuote(body)}`,
  ].join('\n');
}

const pyStr = (s: string): string => JSON.stringify(s);

export function pythonSnippet(input: SnippetInput): string {
  const body = requestBody(input);
  const messages = (body['messages'] as { role: string; content: string }[])
    .map((m) => `        {"role": ${pyStr(m.role)}, "content": ${pyStr(m.content)}},`)
    .join('\n');
  const lines = [
    'from openai import OpenAI',
    '',
    'client = OpenAI(',
    `    base_url=${pyStr(trimTrailingSlashes(input.baseUrl))},`,
    `    api_key=${pyStr(input.apiKey ?? KEY_PLACEHOLDER)},`,
    ')',
    '',
    'response = client.chat.completions.create(',
  ];
  lines.push(`    model=${pyStr(input.model ?? '')},`);
  lines.push('    messages=[', messages, '    ],', `    max_tokens=${String(body['max_tokens'])},`);
  if (body['temperature'] !== undefined) lines.push(`    temperature=${String(body['temperature'])},`);
  lines.push(')', 'print(response.choices[0].message.content)');
  return lines.join('\n');
}

export function nodeSnippet(input: SnippetInput): string {
  const body = requestBody(input);
  const params = JSON.stringify({ ...body, model: input.model ?? '' }, null, 2).replace(/\n/g, '\n');
  return [
    "import OpenAI from 'openai';",
    '',
    'const client = new OpenAI({',
    `  baseURL: ${JSON.stringify(trimTrailingSlashes(input.baseUrl))},`,
    `  apiKey: ${JSON.stringify(input.apiKey ?? KEY_PLACEHOLDER)},`,
    '});',
    '',
    `const response = await client.chat.completions.create(${params});`,
    'console.log(response.choices[0].message.content);',
  ].join('\n');
}
