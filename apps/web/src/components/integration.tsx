import { useState } from 'react';
import { curlSnippet, KEY_PLACEHOLDER, nodeSnippet, pythonSnippet } from '@infer/shared/snippets';
import { CopyButton } from './copy-button.tsx';
import { Tabs } from './tabs.tsx';

type Lang = 'curl' | 'python' | 'node';
const LANGS = [
  { key: 'curl', label: 'curl' },
  { key: 'python', label: 'Python' },
  { key: 'node', label: 'Node' },
] as const;

/** API Base URL, Model Name and API Key with copy buttons, and the matching client snippets. */
export function IntegrationView(props: { mode: 'shared' | 'dedicated'; baseUrl: string; model: string; apiKey: string | null }) {
  const [lang, setLang] = useState<Lang>('curl');
  const input = { baseUrl: props.baseUrl, model: props.model, apiKey: props.apiKey };
  const snippet = lang === 'curl' ? curlSnippet(input) : lang === 'python' ? pythonSnippet(input) : nodeSnippet(input);
  const key = props.apiKey ?? KEY_PLACEHOLDER;
  return (
    <div className="integration" data-mode={props.mode}>
      <dl className="client-values">
        <div>
          <dt>API Base URL</dt>
          <dd>
            <code data-testid={`${props.mode}-base-url`}>{props.baseUrl}</code> <CopyButton text={props.baseUrl} label="Copy API Base URL" />
          </dd>
        </div>
        <div>
          <dt>Model Name</dt>
          <dd>
            <code data-testid={`${props.mode}-model`}>{props.model}</code> <CopyButton text={props.model} label="Copy Model Name" />
          </dd>
        </div>
        <div>
          <dt>API Key</dt>
          <dd>
            <code data-testid={`${props.mode}-api-key`} className="secret">
              {key}
            </code>{' '}
            <CopyButton text={key} label="Copy API Key" />
          </dd>
        </div>
      </dl>
      <Tabs label={`${props.mode} snippets`} tabs={LANGS} value={lang} onChange={setLang}>
        <div className="snippet">
          <pre>
            <code data-testid={`${props.mode}-snippet-${lang}`}>{snippet}</code>
          </pre>
          <CopyButton text={snippet} label={`Copy ${lang} snippet`} />
        </div>
      </Tabs>
    </div>
  );
}
