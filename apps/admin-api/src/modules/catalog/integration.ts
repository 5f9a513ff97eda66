import type { PublicUrls } from '../../trpc/context.ts';

/** Spec 5.4: the key position shows this placeholder; secrets are shown once, never here. */
export const KEY_PLACEHOLDER = '<INFERENCE_API_KEY>';
/** The <tenant> segment shown to callers who cannot see a tenant-scoped URL. */
export const TENANT_PLACEHOLDER = '<tenant>';

export type IntegrationMode = 'shared' | 'dedicated';

/** The client values of spec 1.6 and ready-to-paste snippets for one endpoint on one surface. */
export interface Integration {
  mode: IntegrationMode;
  /** The tenant of a dedicated URL; null for shared or the placeholder URL. */
  tenantSlug: string | null;
  apiBaseUrl: string;
  /** Shared: the catalog Name. Dedicated: "<provider>/<Name>" (the Name when there is no provider). */
  modelName: string;
  apiKey: string;
  snippets: { curl: string; python: string; node: string };
}

const trimSlash = (s: string): string => s.replace(/\/+$/, '');

/** `{dataplane}/funccall/<tenant>/endpoints/<Name>/v1` (spec 4 #2, up to and including v1). */
export function dedicatedBaseUrl(urls: PublicUrls, tenantSlug: string, name: string): string {
  const seg = (s: string) => (s === TENANT_PLACEHOLDER ? s : encodeURIComponent(s));
  return `${trimSlash(urls.dataplaneUrl)}/funccall/${seg(tenantSlug)}/endpoints/${encodeURIComponent(name)}/v1`;
}

export function dedicatedModelName(name: string, provider: string | null): string {
  return provider && provider.trim() ? `${provider.trim()}/${name}` : name;
}

/** Builds the integration shape; `tenantSlug` null on dedicated gives the `<tenant>` placeholder URL. */
export function buildIntegration(
  urls: PublicUrls,
  entry: { name: string; provider: string | null },
  mode: IntegrationMode,
  tenantSlug: string | null = null,
): Integration {
  const apiBaseUrl =
    mode === 'shared' ? trimSlash(urls.sharedBaseUrl) : dedicatedBaseUrl(urls, tenantSlug ?? TENANT_PLACEHOLDER, entry.name);
  const modelName = mode === 'shared' ? entry.name : dedicatedModelName(entry.name, entry.provider);
  return {
    mode,
    tenantSlug: mode === 'dedicated' ? tenantSlug : null,
    apiBaseUrl,
    modelName,
    apiKey: KEY_PLACEHOLDER,
    snippets: snippets(apiBaseUrl, modelName),
  };
}

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const str = (s: string): string => JSON.stringify(s);
const MESSAGES = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Say hello in one short sentence.' },
] as const;

function snippets(baseUrl: string, model: string): Integration['snippets'] {
  const body = JSON.stringify({ model, messages: MESSAGES, max_tokens: 128 }, null, 2);
  const curl = [
    `curl ${shellQuote(`${baseUrl}/chat/completions`)} \\`,
    `  -H ${shellQuote(`Authorization: Bearer ${KEY_PLACEHOLDER}`)} \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d ${shellQuote(body)}`,
  ].join('\n');
  const pyMessages = MESSAGES.map((m) => `        {"role": ${str(m.role)}, "content": ${str(m.content)}},`);
  const python = [
    'from openai import OpenAI',
    '',
    `client = OpenAI(base_url=${str(baseUrl)}, api_key=${str(KEY_PLACEHOLDER)})`,
    '',
    'response = client.chat.completions.create(',
    `    model=${str(model)},`,
    '    messages=[',
    ...pyMessages,
    '    ],',
    '    max_tokens=128,',
    ')',
    'print(response.choices[0].message.content)',
  ].join('\n');
  const jsMessages = MESSAGES.map((m) => `    { role: ${str(m.role)}, content: ${str(m.content)} },`);
  const node = [
    "import OpenAI from 'openai';",
    '',
    `const client = new OpenAI({ baseURL: ${str(baseUrl)}, apiKey: ${str(KEY_PLACEHOLDER)} });`,
    '',
    'const response = await client.chat.completions.create({',
    `  model: ${str(model)},`,
    '  messages: [',
    ...jsMessages,
    '  ],',
    '  max_tokens: 128,',
    '});',
    'console.log(response.choices[0].message.content);',
  ].join('\n');
  return { curl, python, node };
}
