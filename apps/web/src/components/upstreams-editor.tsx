import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { api, type CatalogEntry, type UpstreamInput } from '../api.tsx';
import { Empty, ErrorBox, QueryView } from './states.tsx';
import { ActionsHeader, DataTable } from './data-table.tsx';

const KINDS = ['vllm', 'sglang', 'tgi', 'ollama', 'openai', 'sim'] as const satisfies readonly UpstreamInput['kind'][];

/** The checks the API makes (it checks again and names the field). */
function upstreamErrors(d: { url: string; servedModel: string; weight: string }): Partial<Record<'url' | 'servedModel' | 'weight', string>> {
  const errors: Partial<Record<'url' | 'servedModel' | 'weight', string>> = {};
  try {
    const u = new URL(d.url.trim());
    if (u.protocol !== 'http:' && u.protocol !== 'https:') errors.url = 'Must be an http(s) URL';
  } catch {
    errors.url = 'An absolute http(s) URL, e.g. http://10.0.0.5:8000/v1';
  }
  if (!d.servedModel.trim()) errors.servedModel = 'The model name the runtime serves';
  else if (d.servedModel.length > 300) errors.servedModel = 'At most 300 characters';
  if (d.weight.trim() !== '' && !(/^\d+$/.test(d.weight.trim()) && Number(d.weight) >= 1 && Number(d.weight) <= 1000))
    errors.weight = 'A whole number from 1 to 1000';
  return errors;
}

/**
 * The shared-surface runtimes of one catalog entry. A runtime's API key is write-only: it is sent once,
 * stored sealed, and never shown back (the list says only whether one is set). Changing an upstream is
 * adding the new one and removing the old, as the API offers.
 */
export function UpstreamsEditor({ entry }: { entry: CatalogEntry }) {
  const id = useId();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['catalog.upstreams', entry.id], queryFn: () => api.catalog.upstreams(entry.id) });
  const [d, setD] = useState({ url: '', kind: 'vllm' as UpstreamInput['kind'], servedModel: entry.name, apiKey: '', weight: '' });
  const [touched, setTouched] = useState(false);
  const errors = upstreamErrors(d);
  const done = () => void qc.invalidateQueries({ queryKey: ['catalog.upstreams', entry.id] });
  const add = useMutation({
    mutationFn: () =>
      api.catalog.addUpstream({
        entryId: entry.id,
        url: d.url.trim(),
        kind: d.kind,
        servedModel: d.servedModel.trim(),
        ...(d.apiKey ? { apiKey: d.apiKey } : {}),
        ...(d.weight.trim() ? { weight: Number(d.weight) } : {}),
      }),
    onSuccess: () => {
      setD({ ...d, url: '', apiKey: '', weight: '' });
      setTouched(false);
      done();
    },
  });
  const remove = useMutation({ mutationFn: (upstreamId: string) => api.catalog.removeUpstream(upstreamId), onSuccess: done });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setTouched(true);
    if (Object.keys(errors).length === 0) add.mutate();
  };
  const err = (k: 'url' | 'servedModel' | 'weight') => (touched ? errors[k] : undefined);
  return (
    <section className="panel upstreams" aria-labelledby={`${id}-h`}>
      <h3 id={`${id}-h`}>Upstreams (shared surface)</h3>
      <p className="muted small">OpenAI-compatible runtimes that serve this entry's shared endpoint. Keys are write-only: never shown back.</p>
      <QueryView query={list} what="upstreams">
        {(ups) =>
          ups.length === 0 ? (
            <Empty>No upstreams: the shared endpoint has nowhere to send requests.</Empty>
          ) : (
            <DataTable
              className="stack-table"
              head={
                <>
                  <th scope="col">URL</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Served model</th>
                  <th scope="col" className="num">
                    Weight
                  </th>
                  <th scope="col">Key</th>
                  <ActionsHeader />
                </>
              }
            >
              {ups.map((u) => (
                <tr key={u.id} data-upstream={u.url}>
                  <td data-label="URL" className="name-cell">
                    <code className="wrap">{u.url}</code>
                  </td>
                  <td data-label="Kind">{u.kind}</td>
                  <td data-label="Served model" className="name-cell">
                    {u.servedModel}
                  </td>
                  <td data-label="Weight" className="num">
                    {u.weight}
                  </td>
                  <td data-label="Key">{u.hasApiKey ? 'set (hidden)' : 'none'}</td>
                  <td>
                    <button
                      type="button"
                      className="danger"
                      disabled={remove.isPending}
                      onClick={() => remove.mutate(u.id)}
                      aria-label={`Remove upstream ${u.url}`}
                    >
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </DataTable>
          )
        }
      </QueryView>
      {remove.isError && <ErrorBox error={remove.error} />}
      <form className="form-grid upstream-form" onSubmit={submit} noValidate aria-label="Add an upstream">
        <div className="field span-2">
          <label htmlFor={`${id}-url`}>Runtime URL</label>
          <input
            id={`${id}-url`}
            type="url"
            value={d.url}
            placeholder="http://10.0.0.5:8000/v1"
            aria-invalid={err('url') ? true : undefined}
            onChange={(e) => setD({ ...d, url: e.target.value })}
          />
          {err('url') && <p className="field-error">{err('url')}</p>}
        </div>
        <div className="field">
          <label htmlFor={`${id}-kind`}>Kind</label>
          <select id={`${id}-kind`} value={d.kind} onChange={(e) => setD({ ...d, kind: e.target.value as UpstreamInput['kind'] })}>
            {KINDS.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${id}-served`}>Served model</label>
          <input
            id={`${id}-served`}
            value={d.servedModel}
            aria-invalid={err('servedModel') ? true : undefined}
            onChange={(e) => setD({ ...d, servedModel: e.target.value })}
          />
          {err('servedModel') && <p className="field-error">{err('servedModel')}</p>}
        </div>
        <div className="field">
          <label htmlFor={`${id}-key`}>API key (optional)</label>
          <input id={`${id}-key`} type="password" autoComplete="new-password" value={d.apiKey} onChange={(e) => setD({ ...d, apiKey: e.target.value })} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-weight`}>Weight (optional)</label>
          <input
            id={`${id}-weight`}
            inputMode="numeric"
            value={d.weight}
            placeholder="1"
            aria-invalid={err('weight') ? true : undefined}
            onChange={(e) => setD({ ...d, weight: e.target.value })}
          />
          {err('weight') && <p className="field-error">{err('weight')}</p>}
        </div>
        <div className="row span-all">
          <button type="submit" disabled={add.isPending}>
            {add.isPending ? 'Adding…' : 'Add upstream'}
          </button>
        </div>
      </form>
      {add.isError && <ErrorBox error={add.error} />}
    </section>
  );
}
