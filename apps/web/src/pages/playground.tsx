import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { api } from '../api.tsx';
import { CopyButton } from '../components/copy-button.tsx';
import { ErrorBox, Loading } from '../components/states.tsx';
import { Tabs } from '../components/tabs.tsx';
import { chunkText, readSse, StreamError } from '../lib/sse.ts';
import { formatGpuHourPrice, formatTokenPrice, formatUsd } from '../lib/format.ts';
import { forgetPlaygroundKey, loadPlaygroundKey, savePlaygroundKey } from '../lib/playground-key.ts';
import { useSingleFlight } from '../lib/single-flight.ts';
import { curlSnippet, KEY_PLACEHOLDER, requestBody, type SnippetInput } from '@infer/shared/snippets';
import { Link, useRouter } from '../router.tsx';
import { useSession } from '../session.tsx';
import { dedicatedBaseUrl, dedicatedModelName } from '@infer/shared/public-urls';

interface Turn {
  role: 'user' | 'assistant';
  content: string;
}
type View = 'chat' | 'json' | 'curl';
type KeySource = 'paste' | 'playground' | 'tab';

/** What the last reply measured: usage from the stream's final chunk, timings from this page. */
interface ReplyStats {
  readonly promptTokens: number | null;
  readonly completionTokens: number | null;
  readonly ttftMs: number | null;
  readonly totalMs: number;
  readonly tokensPerSecond: number | null;
  readonly finishReason: string | null;
  readonly maxTokens: number;
  readonly costUsd: number | null;
  readonly mode: 'shared' | 'dedicated';
}

function finishText(s: ReplyStats): string {
  if (s.finishReason === 'length') return `Stopped at max_tokens (${s.maxTokens}): the reply was cut off. Raise max_tokens for a longer answer.`;
  if (s.finishReason === 'stop') return 'Finished normally (stop).';
  return s.finishReason ? `Finish reason: ${s.finishReason}` : 'No finish reason reported.';
}

function StatsView({ stats }: { stats: ReplyStats }) {
  const n = (v: number | null) => (v == null ? '—' : v.toLocaleString('en-US'));
  return (
    <div className="reply-stats" data-testid="reply-stats">
      <dl>
        <div>
          <dt>Prompt tokens</dt>
          <dd data-testid="stat-prompt">{n(stats.promptTokens)}</dd>
        </div>
        <div>
          <dt>Completion tokens</dt>
          <dd data-testid="stat-completion">{n(stats.completionTokens)}</dd>
        </div>
        <div>
          <dt>Time to first token</dt>
          <dd data-testid="stat-ttft">{stats.ttftMs == null ? '—' : `${Math.round(stats.ttftMs)} ms`}</dd>
        </div>
        <div>
          <dt>Tokens/s</dt>
          <dd data-testid="stat-tps">{stats.tokensPerSecond == null ? '—' : stats.tokensPerSecond.toFixed(1)}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd data-testid="stat-cost">{stats.mode === 'dedicated' ? 'GPU time' : stats.costUsd == null ? '—' : formatUsd(stats.costUsd)}</dd>
        </div>
      </dl>
      <p className={stats.finishReason === 'length' ? 'finish warn' : 'finish'} data-testid="stat-finish">
        {finishText(stats)}
      </p>
    </div>
  );
}

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
  const [mode, setMode] = useState<'shared' | 'dedicated'>(location.query.get('mode') === 'dedicated' ? 'dedicated' : 'shared');
  const [keyId, setKeyId] = useState(session.sessionKeys[0]?.id ?? '');
  // A pasted key lives in this component's memory only: never stored, gone on reload.
  const [pasted, setPasted] = useState('');
  const [playgroundKey, setPlaygroundKey] = useState(() => loadPlaygroundKey(tenantId));
  const [keySource, setKeySource] = useState<KeySource>(() => (loadPlaygroundKey(tenantId) ? 'playground' : session.sessionKeys.length > 0 ? 'tab' : 'paste'));
  const [stats, setStats] = useState<ReplyStats | null>(null);
  const [system, setSystem] = useState('You are a helpful assistant.');
  const [turns, setTurns] = useState<Turn[]>([]);
  const [draft, setDraft] = useState('');
  const [maxTokens, setMaxTokens] = useState('256');
  const [temperature, setTemperature] = useState('0.7');
  const [view, setView] = useState<View>('chat');
  const [streaming, setStreaming] = useState(false);
  const [reply, setReply] = useState('');
  const [status, setStatus] = useState<{ kind: 'done' | 'stopped' | 'error'; text: string } | null>(null);
  // The data plane holds this request through a cold start (its `x-cold-start` header): said until the first token.
  const [coldStart, setColdStart] = useState(false);
  const abortRef = useRef<AbortController | null>(null);
  useEffect(() => () => abortRef.current?.abort(), []);

  // The one playground key of this browser: reused by every tab until it is revoked or the user logs out.
  const keys = useQuery({ queryKey: ['keys.list', tenantId], queryFn: () => api.keys.list(tenantId), enabled: playgroundKey !== null });
  useEffect(() => {
    if (!playgroundKey || !keys.data) return;
    const k = keys.data.find((x) => x.id === playgroundKey.id);
    if (!k || k.revokedAt) {
      forgetPlaygroundKey(tenantId);
      setPlaygroundKey(null);
    }
  }, [keys.data, playgroundKey, tenantId]);
  const createKey = useMutation({
    mutationFn: () => api.keys.create(tenantId, 'playground', null),
    onSuccess: (created) => {
      const k = { id: created.key.id, prefix: created.key.prefix, secret: created.secret };
      savePlaygroundKey(tenantId, k);
      setPlaygroundKey(k);
      setKeySource('playground');
      void qc.invalidateQueries({ queryKey: ['keys.list'] });
    },
  });
  const createKeyOnce = useSingleFlight(createKey);

  if (entries.isPending || urls.isPending) return <Loading what="Loading the playground" />;
  if (entries.isError || urls.isError)
    return (
      <ErrorBox
        error={entries.error ?? urls.error}
        retry={() => {
          void entries.refetch();
          void urls.refetch();
        }}
      />
    );

  const entry = entries.data.find((e) => e.name === endpoint) ?? entries.data.find((e) => e.offeredShared) ?? entries.data[0];
  const deployment = deployments.data?.find((d) => d.entryName === entry?.name && d.state !== 'stopped' && d.state !== 'failed');
  // The tenant's deployment of this entry that does not serve now (a tenant has one per entry): started, not redeployed.
  const halted = deployment ? undefined : deployments.data?.find((d) => d.entryName === entry?.name);
  const modes = [...(entry?.offeredShared ? ['shared' as const] : []), ...(deployment ? ['dedicated' as const] : [])];
  const currentMode = modes.includes(mode) ? mode : (modes[0] ?? 'shared');
  const tabKey = session.sessionKeys.find((k) => k.id === keyId) ?? session.sessionKeys[0];
  const key: { secret: string } | undefined =
    keySource === 'paste' ? (pasted.trim() ? { secret: pasted.trim() } : undefined) : keySource === 'playground' ? (playgroundKey ?? undefined) : tabKey;
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
  const snippetInput: SnippetInput = {
    baseUrl,
    model,
    apiKey: key?.secret ?? null,
    messages,
    maxTokens: maxTokensNum,
    temperature: temperatureNum,
    stream: true,
  };
  // Asks for the usage chunk at the end of the stream: the token counts shown after a reply are the platform's own.
  const body = { ...requestBody(snippetInput), stream_options: { include_usage: true } };

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
    setStats(null);
    setStreaming(true);
    let text = '';
    const started = performance.now();
    let firstAt: number | null = null;
    const seen: { usage: { prompt_tokens?: number; completion_tokens?: number } | null } = { usage: null };
    let finishReason: string | null = null;
    try {
      const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key.secret}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!res.ok || !res.body) throw new Error(await failure(res));
      setColdStart(res.headers.get('x-cold-start') === 'true');
      for await (const event of readSse(res.body, controller.signal)) {
        const delta = chunkText(event);
        if (delta) {
          if (firstAt === null) {
            firstAt = performance.now();
            setColdStart(false);
          }
          text += delta;
          setReply(text);
        }
        const ev = event as { usage?: typeof seen.usage; choices?: { finish_reason?: string | null }[] } | null;
        if (ev?.usage) seen.usage = ev.usage;
        const fr = ev?.choices?.[0]?.finish_reason;
        if (fr) finishReason = fr;
      }
      const ended = performance.now();
      const completion = seen.usage?.completion_tokens ?? null;
      const prompt = seen.usage?.prompt_tokens ?? null;
      const genSeconds = firstAt === null ? 0 : (ended - firstAt) / 1000;
      const price =
        currentMode === 'shared' && entry.priceInputPerM != null && entry.priceOutputPerM != null && prompt != null && completion != null
          ? (prompt * entry.priceInputPerM + completion * entry.priceOutputPerM) / 1e6
          : null;
      setStats({
        promptTokens: prompt,
        completionTokens: completion,
        ttftMs: firstAt === null ? null : firstAt - started,
        totalMs: ended - started,
        tokensPerSecond: completion != null && completion > 1 && genSeconds > 0 ? (completion - 1) / genSeconds : null,
        finishReason,
        maxTokens: maxTokensNum,
        costUsd: price,
        mode: currentMode,
      });
      setStatus({ kind: 'done', text: `Finished in ${((ended - started) / 1000).toFixed(1)} s` });
    } catch (err) {
      if (controller.signal.aborted) setStatus({ kind: 'stopped', text: 'Stopped.' });
      // A stream that carried an error (or was cut) failed: never "Finished", whatever text came before.
      else if (err instanceof StreamError) setStatus({ kind: 'error', text: `The reply failed: ${err.message}` });
      else setStatus({ kind: 'error', text: err instanceof Error ? err.message : 'The request failed.' });
    } finally {
      if (text) setTurns([...sent, { role: 'assistant', content: text }]);
      else {
        // Nothing came back (an error, or stopped before the first token): the message goes back into the box, not
        // into the conversation, where the next send would repeat it as a second user turn in a row. What was typed
        // meanwhile stays, after it.
        setTurns(turns);
        setDraft((typed) => (typed.trim() === '' ? pendingUser : `${pendingUser}\n\n${typed}`));
      }
      setReply('');
      setColdStart(false);
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
              {entries.data.map((e) => (
                <option key={e.id} value={e.name}>
                  {e.name}
                </option>
              ))}
            </select>
          </div>
          <div className="field">
            <label htmlFor="pg-mode">Mode</label>
            <select id="pg-mode" value={currentMode} onChange={(e) => setMode(e.target.value as 'shared' | 'dedicated')} disabled={modes.length < 2}>
              {modes.map((m) => (
                <option key={m} value={m}>
                  {m === 'shared' ? 'Shared (token-billed)' : 'Dedicated'}
                </option>
              ))}
            </select>
            {entry?.offeredDedicated && !deployment && halted && (
              <p className="hint">
                Your dedicated deployment of {entry.name} is {halted.state}: <Link to={`/deployments/${halted.id}`}>start it</Link> from its page.
              </p>
            )}
            {entry?.offeredDedicated && !deployment && !halted && (
              <p className="hint">
                Dedicated needs a <Link to={`/deployments?entry=${encodeURIComponent(entry.name)}`}>deployment</Link>.
              </p>
            )}
            {modes.length === 0 && <p className="field-error">This endpoint has no mode you can call yet.</p>}
            {entry && modes.length > 0 && (
              <p className="hint" data-testid="pg-price">
                {currentMode === 'shared'
                  ? formatTokenPrice(entry.priceInputPerM, entry.priceOutputPerM) || 'No token price set.'
                  : entry.dedicatedPricePerGpuHour != null
                    ? `${formatGpuHourPrice(entry.dedicatedPricePerGpuHour)} while replicas run (tokens not billed)`
                    : 'Billed by GPU time; no GPU-hour price set.'}
              </p>
            )}
          </div>
          <fieldset className="key-source">
            <legend>API key</legend>
            <label className="checkbox">
              <input type="radio" name="pg-key-source" checked={keySource === 'paste'} onChange={() => setKeySource('paste')} /> Paste a key
            </label>
            <label className="checkbox">
              <input type="radio" name="pg-key-source" checked={keySource === 'playground'} onChange={() => setKeySource('playground')} /> Playground key
              {playgroundKey && <span className="muted small"> ({playgroundKey.prefix}…)</span>}
            </label>
            {session.sessionKeys.length > 0 && (
              <label className="checkbox">
                <input type="radio" name="pg-key-source" checked={keySource === 'tab'} onChange={() => setKeySource('tab')} /> A key created in this tab
              </label>
            )}
            {keySource === 'paste' && (
              <div className="field">
                <label htmlFor="pg-key-paste" className="visually-hidden">
                  Your API key
                </label>
                <input
                  id="pg-key-paste"
                  type="password"
                  autoComplete="off"
                  spellCheck={false}
                  placeholder="infk_…"
                  value={pasted}
                  onChange={(e) => setPasted(e.target.value)}
                />
                <p className="hint">Kept in this tab's memory only; never stored or sent anywhere but the API.</p>
              </div>
            )}
            {keySource === 'playground' && !playgroundKey && (
              <div className="field">
                <button type="button" onClick={() => createKeyOnce(undefined)} disabled={createKey.isPending}>
                  {createKey.isPending ? 'Creating…' : 'Create the playground key'}
                </button>
                <p className="hint">One key named "playground", reused by every tab of this browser until you log out or revoke it.</p>
              </div>
            )}
            {keySource === 'tab' && (
              <div className="field">
                <label htmlFor="pg-key" className="visually-hidden">
                  Key created in this tab
                </label>
                <select id="pg-key" value={tabKey?.id ?? ''} onChange={(e) => setKeyId(e.target.value)}>
                  {session.sessionKeys.map((k) => (
                    <option key={k.id} value={k.id}>
                      {k.name} ({k.prefix}…)
                    </option>
                  ))}
                </select>
              </div>
            )}
            {createKey.isError && <ErrorBox error={createKey.error} />}
          </fieldset>
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
          <Tabs
            label="Playground view"
            tabs={[
              { key: 'chat', label: 'Chat' },
              { key: 'json', label: 'Request JSON' },
              { key: 'curl', label: 'curl' },
            ]}
            value={view}
            onChange={setView}
          >
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
                    {coldStart && !reply && (
                      <p className="muted small" role="status" data-testid="cold-start">
                        Cold start: a replica is starting{entry?.coldStartTtft ? ` (about ${entry.coldStartTtft})` : ''}. The reply follows when it is ready.
                      </p>
                    )}
                  </div>
                )}
                {status && (
                  <p
                    className={status.kind === 'error' ? 'state error' : 'reply-meta'}
                    role={status.kind === 'error' ? 'alert' : 'status'}
                    data-testid="reply-status"
                  >
                    {status.text}
                  </p>
                )}
                {stats && !streaming && <StatsView stats={stats} />}
                <form className="form" onSubmit={(e) => void send(e)}>
                  <div className="field">
                    <label htmlFor="pg-message">Message</label>
                    <textarea
                      id="pg-message"
                      value={draft}
                      onChange={(e) => setDraft(e.target.value)}
                      onKeyDown={(e) => {
                        if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void send(e);
                      }}
                      placeholder="Ask something (Ctrl+Enter sends)"
                    />
                  </div>
                  <div className="row">
                    {streaming ? (
                      <button type="button" className="danger" onClick={stop}>
                        Stop
                      </button>
                    ) : (
                      <button type="submit" className="primary" disabled={!key || !pendingUser || !entry || modes.length === 0 || !paramsValid}>
                        Send
                      </button>
                    )}
                    <button
                      type="button"
                      onClick={() => {
                        setTurns([]);
                        setStatus(null);
                        setStats(null);
                      }}
                      disabled={streaming || turns.length === 0}
                    >
                      Clear conversation
                    </button>
                    {!key && <span className="muted small">Choose an API key first.</span>}
                  </div>
                </form>
              </div>
            ) : view === 'json' ? (
              <div className="snippet">
                <p className="muted small">POST {baseUrl}/chat/completions</p>
                <pre className="wrap-pre">
                  <code data-testid="request-json">{JSON.stringify(body, null, 2)}</code>
                </pre>
                <CopyButton text={JSON.stringify(body, null, 2)} label="Copy request JSON" />
              </div>
            ) : (
              <div className="snippet">
                <pre className="wrap-pre">
                  <code data-testid="request-curl">{curlSnippet(snippetInput)}</code>
                </pre>
                <CopyButton text={curlSnippet(snippetInput)} label="Copy curl" />
                {!key && <p className="muted small">The key slot shows {KEY_PLACEHOLDER} until you choose a key.</p>}
                {keySource === 'paste' && key && <p className="muted small">This snippet contains your pasted key: copy it with care.</p>}
              </div>
            )}
          </Tabs>
        </div>
      </div>
    </section>
  );
}
