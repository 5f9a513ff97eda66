import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { api } from '../api.tsx';
import { CopyButton } from '../components/copy-button.tsx';
import { ErrorBox, Loading } from '../components/states.tsx';
import { Tabs } from '../components/tabs.tsx';
import { chunkText, readSse } from '../lib/sse.ts';
import { curlSnippet, KEY_PLACEHOLDER, requestBody, type SnippetInput } from '@infer/shared/snippets';
import { Link, useRouter } from '../router.tsx';
import { useSession } from '../session.tsx';
import { dedicatedBaseUrl, dedicatedModelName } from './endpoint.tsx';

interface Turn { role: 'user' | 'assistant'; content: string }
type View = 'chat' | 'json' | 'curl';

/** Reads the OpenAI error body of a failed call, if it has one. */
async function failure(res: Response): Promise<string> {
  try {
    const body = (await res.json()) as { error?: { message?: string } };
    if (body.error?.message) return `${res.status}: ${body.error.message}`;
  } catch {
    // not JSON
  }
  return `${res.status} ${res.statusText}`;
}

export function PlaygroundPage() {
  const session = useSession();
  const { location } = useRouter();
  const tenantId = session.tenantId as string;
  const tenantSlug = session.tenant?.slug ?? '';
  const qc = useQueryClient();
  const entries = useQuery({ queryKey: ['catalog.list', {}], queryFn: () => api.catalog.list({}) });
  const urls = useQuery({ queryKey: ['platform.urls'], queryFn: () => api.platform.urls(), staleTime: Infinity });
  const deployments = useQuery({ queryKey: ['deployments.list', tenantId], queryFn: () => api.deployments.list(tenantId) });

  const [endpoint, setEndpoint] = useState(location.query.get('endpoint') ?? '');
  const [mode, setMode] = useState<'shared' | 'dedicated'>('shared');
  const [keyId, setKeyId] = useState(session.sessionKeys[0]?.id ?? '');
  const [system, setSystem] = useState('You are a helpful assistant.');
  const [turns, setTurns] = useState<Turn[]>([]);
  const [draft, setDraft] = useState('');
  const [maxTokens, setMaxTokens] = useState('256');
  const [temperature, setTemperature] = useState('0.7');
  const [view, setView] = useState<View>('chat');
  const [streaming, setStreaming] = useState(false);
  const [reply, setReply] = useState('');
  const [status, setStatus] = useState<{ kind: 'done' | 'stopped' | 'error'; text: string } | null>(null);
  const abortRef = useRef<AbortController | null>(null);
  useEffect(() => () => abortRef.current?.abort(), []);

  const createKey = useMutation({
    mutationFn: () => api.keys.create(tenantId, `playground ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`, null),
    onSuccess: (created) => {
      session.addSessionKey({ id: created.key.id, tenantId, name: created.key.name, prefix: created.key.prefix, secret: created.secret });
      setKeyId(created.key.id);
      void qc.invalidateQueries({ queryKey: ['keys.list'] });
    },
  });

  if (entries.isPending || urls.isPending) return <Loading what="Loading the playground" />;
  if (entries.isError || urls.isError) return <ErrorBox error={entries.error ?? urls.error} retry={() => { void entries.refetch(); void urls.refetch(); }} />;

  const entry = entries.data.find((e) => e.name === endpoint) ?? entries.data.find((e) => e.offeredShared) ?? entries.data[0];
  const deployment = deployments.data?.find((d) => d.entryName === entry?.name && d.state !== 'stopped' && d.state !== 'failed');
  const modes = [...(entry?.offeredShared ? ['shared' as const] : []), ...(deployment ? ['dedicated' as const] : [])];
  const currentMode = modes.includes(mode) ? mode : (modes[0] ?? 'shared');
  const key = session.sessionKeys.find((k) => k.id === keyId) ?? session.sessionKeys[0];
  const baseUrl = !entry ? '' : currentMode === 'shared' ? urls.data.sharedBaseUrl : dedicatedBaseUrl(urls.data, tenantSlug, entry.name);
  const model = !entry ? '' : currentMode === 'shared' ? entry.name : dedicatedModelName(entry.name, entry.provider);
  const pendingUser = draft.trim();
  const messages = [
    ...(system.trim() ? [{ role: 'system', content: system }] : []),
    ...turns,
    ...(pendingUser ? [{ role: 'user', content: pendingUser }] : []),
  ];
  const maxTokensNum = Number(maxTokens);
  const temperatureNum = Number(temperature);
  const paramsValid = Number.isInteger(maxTokensNum) && maxTokensNum >= 1 && Number.isFinite(temperatureNum) && temperatureNum >= 0 && temperatureNum <= 2;
  const snippetInput: SnippetInput = { baseUrl, model, apiKey: key?.secret ?? null, messages, maxTokens: maxTokensNum, temperature: temperatureNum, stream: true };
  const body = requestBody(snippetInput);

  const send = async (e: FormEvent) => {
    e.preventDefault();
    if (!entry || !key || !pendingUser || streaming || !paramsValid) return;
    const controller = new AbortController();
    abortRef.current = controller;
    const sent = [...turns, { role: 'user' as const, content: pendingUser }];
    setTurns(sent);
    setDraft('');
    setReply('');
    setStatus(null);
    setStreaming(true);
    let text = '';
    const started = performance.now();
    try {
      const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key.secret}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!res.ok || !res.body) throw new Error(await failure(res));
      for await (const event of readSse(res.body, controller.signal)) {
        const delta = chunkText(event);
        if (delta) {
          text += delta;
          setReply(text);
        }
      }
      setStatus({ kind: 'done', text: `Finished in ${((performance.now() - started) / 1000).toFixed(1)} s` });
    } catch (err) {
      if (controller.signal.aborted) setStatus({ kind: 'stopped', text: 'Stopped.' });
      else setStatus({ kind: 'error', text: err instanceof Error ? err.message : 'The request failed.' });
    } finally {
      if (text) setTurns([...sent, { role: 'assistant', content: text }]);
      setReply('');
      setStreaming(false);
      abortRef.current = null;
    }
  };
  const stop = () => abortRef.current?.abort();

  return (
    <section>
      <h1>Playground</h1>
      <div className="playground">
        <form className="form" onSubmit={(e) => e.preventDefault()} aria-label="Settings">
          <div className="field">
            <label htmlFor="pg-endpoint">Endpoint</label>
            <select id="pg-endpoint" value={entry?.name ?? ''} onChange={(e) => setEndpoint(e.target.value)}>
              {entries.data.map((e) => <option key={e.id} value={e.name}>{e.name}</option>)}
            </select>
          </div>
          <div className="field">
            <label htmlFor="pg-mode">Mode</label>
            <select id="pg-mode" value={currentMode} onChange={(e) => setMode(e.target.value as 'shared' | 'dedicated')} disabled={modes.length < 2}>
              {modes.map((m) => <option key={m} value={m}>{m === 'shared' ? 'Shared (token-billed)' : 'Dedicated'}</option>)}
            </select>
            {entry?.offeredDedicated && !deployment && (
              <p className="hint">Dedicated needs a <Link to={`/deployments?entry=${encodeURIComponent(entry.name)}`}>deployment</Link>.</p>
            )}
            {modes.length === 0 && <p className="field-error">This endpoint has no mode you can call yet.</p>}
          </div>
          <div className="field">
            <label htmlFor="pg-key">API key</label>
            {session.sessionKeys.length > 0 ? (
              <select id="pg-key" value={key?.id ?? ''} onChange={(e) => setKeyId(e.target.value)}>
                {session.sessionKeys.map((k) => <option key={k.id} value={k.id}>{k.name} ({k.prefix}…)</option>)}
              </select>
            ) : (
              <p className="hint" id="pg-key">Keys are shown once, so the playground uses keys created in this browser tab.</p>
            )}
            <button type="button" onClick={() => createKey.mutate()} disabled={createKey.isPending}>
              {createKey.isPending ? 'Creating…' : 'Create a playground key'}
            </button>
            {createKey.isError && <ErrorBox error={createKey.error} />}
          </div>
          <div className="field">
            <label htmlFor="pg-system">System prompt</label>
            <textarea id="pg-system" value={system} onChange={(e) => setSystem(e.target.value)} />
          </div>
          <div className="row">
            <div className="field">
              <label htmlFor="pg-max">max_tokens</label>
              <input id="pg-max" type="number" min={1} max={32768} value={maxTokens} onChange={(e) => setMaxTokens(e.target.value)} />
            </div>
            <div className="field">
              <label htmlFor="pg-temp">temperature</label>
              <input id="pg-temp" type="number" min={0} max={2} step={0.1} value={temperature} onChange={(e) => setTemperature(e.target.value)} />
            </div>
          </div>
          {!paramsValid && <p className="field-error">max_tokens must be a whole number ≥ 1 and temperature between 0 and 2.</p>}
        </form>
        <div>
          <Tabs label="Playground view" tabs={[{ key: 'chat', label: 'Chat' }, { key: 'json', label: 'Request JSON' }, { key: 'curl', label: 'curl' }]} value={view} onChange={setView}>
            {view === 'chat' ? (
              <div className="messages" aria-live="polite">
                {turns.length === 0 && !streaming && <p className="muted">Write a message and press Send. The reply streams token by token.</p>}
                {turns.map((t, i) => (
                  <div key={i} className={`message ${t.role}`}>
                    <span className="role">{t.role}</span>
                    <p>{t.content}</p>
                  </div>
                ))}
                {streaming && (
                  <div className="message assistant streaming" aria-busy="true">
                    <span className="role">assistant</span>
                    <p data-testid="streaming-reply">{reply || '…'}</p>
                  </div>
                )}
                {status && (
                  <p className={status.kind === 'error' ? 'state error' : 'reply-meta'} role={status.kind === 'error' ? 'alert' : 'status'} data-testid="reply-status">
                    {status.text}
                  </p>
                )}
                <form className="form" onSubmit={(e) => void send(e)}>
                  <div className="field">
                    <label htmlFor="pg-message">Message</label>
                    <textarea
                      id="pg-message"
                      value={draft}
                      onChange={(e) => setDraft(e.target.value)}
                      onKeyDown={(e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void send(e); }}
                      placeholder="Ask something (Ctrl+Enter sends)"
                    />
                  </div>
                  <div className="row">
                    {streaming ? (
                      <button type="button" className="danger" onClick={stop}>Stop</button>
                    ) : (
                      <button type="submit" className="primary" disabled={!key || !pendingUser || !entry || modes.length === 0 || !paramsValid}>Send</button>
                    )}
                    <button type="button" onClick={() => { setTurns([]); setStatus(null); }} disabled={streaming || turns.length === 0}>Clear conversation</button>
                    {!key && <span className="muted small">Create a playground key first.</span>}
                  </div>
                </form>
              </div>
            ) : view === 'json' ? (
              <div className="snippet">
                <p className="muted small">POST {baseUrl}/chat/completions</p>
                <pre><code data-testid="request-json">{JSON.stringify(body, null, 2)}</code></pre>
                <CopyButton text={JSON.stringify(body, null, 2)} label="Copy request JSON" />
              </div>
            ) : (
              <div className="snippet">
                <pre><code data-testid="request-curl">{curlSnippet(snippetInput)}</code></pre>
                <CopyButton text={curlSnippet(snippetInput)} label="Copy curl" />
                {!key && <p className="muted small">The key slot shows {KEY_PLACEHOLDER} until you pick a key.</p>}
              </div>
            )}
          </Tabs>
        </div>
      </div>
    </section>
  );
}
