import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { api, type AdminCatalogEntry, type EntryPatch } from '../api.tsx';
import { Empty, ErrorBox, QueryView } from '../components/states.tsx';
import { UpstreamsEditor } from '../components/upstreams-editor.tsx';
import { formatShortDate, providerLabel } from '../lib/format.ts';
import { parseColdStart, parseConcurrency, parseCount, parseList, parseParameterSize, parsePrice } from '../lib/spec-forms.ts';
import { ActionsHeader, DataTable } from '../components/data-table.tsx';

interface Draft {
  name: string;
  provider: string;
  parameterSize: string;
  gpuCount: string;
  contextLength: string;
  concurrency: string;
  coldStartTtft: string;
  priceIn: string;
  priceOut: string;
  priceGpuHour: string;
  useCases: string;
  summary: string;
  detailedIntro: string;
  tags: string;
  offeredShared: boolean;
  offeredDedicated: boolean;
}

const DEFAULT_SUMMARY = 'No summary has been added for this endpoint yet.';

function toDraft(e: AdminCatalogEntry | null): Draft {
  return {
    name: e?.name ?? '',
    provider: e?.provider ?? '',
    parameterSize: e?.parameterSize ?? '',
    gpuCount: e?.gpuCount == null ? '' : String(e.gpuCount),
    contextLength: e?.contextLength == null ? '' : String(e.contextLength),
    concurrency: e?.concurrency ?? '',
    coldStartTtft: e?.coldStartTtft ?? '',
    priceIn: e?.priceInputPerM == null ? '' : String(e.priceInputPerM),
    priceOut: e?.priceOutputPerM == null ? '' : String(e.priceOutputPerM),
    priceGpuHour: e?.dedicatedPricePerGpuHour == null ? '' : String(e.dedicatedPricePerGpuHour),
    useCases: e?.recommendedUseCases ?? '',
    summary: e && e.summary !== DEFAULT_SUMMARY ? e.summary : '',
    detailedIntro: e?.detailedIntro ?? '',
    tags: e?.tags.join(', ') ?? '',
    offeredShared: e?.offeredShared ?? true,
    offeredDedicated: e?.offeredDedicated ?? false,
  };
}

/** Field errors by field, checked before sending (the API checks again and names the field). */
function validate(d: Draft): Partial<Record<keyof Draft, string>> {
  const errors: Partial<Record<keyof Draft, string>> = {};
  if (!d.name.trim()) errors.name = 'Name is required';
  const checks: [keyof Draft, string | null][] = [
    ['parameterSize', parseParameterSize(d.parameterSize).error],
    ['concurrency', parseConcurrency(d.concurrency).error],
    ['coldStartTtft', parseColdStart(d.coldStartTtft).error],
    ['gpuCount', parseCount(d.gpuCount, 'GPU Count').error],
    ['contextLength', parseCount(d.contextLength, 'Context Length').error],
    ['priceIn', parsePrice(d.priceIn, 'Input price').error],
    ['priceOut', parsePrice(d.priceOut, 'Output price').error],
    ['priceGpuHour', parsePrice(d.priceGpuHour, 'GPU-hour price').error],
  ];
  for (const [k, err] of checks) if (err) errors[k] = err;
  return errors;
}

function toPatch(d: Draft): EntryPatch & { name: string } {
  const blank = (s: string) => (s.trim() === '' ? null : s.trim());
  return {
    name: d.name.trim(),
    provider: blank(d.provider),
    parameterSize: blank(d.parameterSize),
    gpuCount: parseCount(d.gpuCount, '').value,
    contextLength: parseCount(d.contextLength, '').value,
    concurrency: blank(d.concurrency),
    coldStartTtft: blank(d.coldStartTtft),
    priceInputPerMillion: parsePrice(d.priceIn, '').value,
    priceOutputPerMillion: parsePrice(d.priceOut, '').value,
    dedicatedPricePerGpuHour: parsePrice(d.priceGpuHour, '').value,
    recommendedUseCases: blank(parseList(d.useCases).join(', ')),
    summary: blank(d.summary),
    detailedIntro: blank(d.detailedIntro),
    tags: parseList(d.tags),
    offeredShared: d.offeredShared,
    offeredDedicated: d.offeredDedicated,
  };
}

function EntryForm({ entry, onDone }: { entry: AdminCatalogEntry | null; onDone(): void }) {
  const id = useId();
  const qc = useQueryClient();
  const [d, setD] = useState<Draft>(() => toDraft(entry));
  const [touched, setTouched] = useState(false);
  const errors = validate(d);
  const save = useMutation({
    mutationFn: () => (entry ? api.catalog.update(entry.id, toPatch(d)) : api.catalog.create(toPatch(d))),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['catalog.admin.list'] });
      void qc.invalidateQueries({ queryKey: ['catalog.list'] });
      void qc.invalidateQueries({ queryKey: ['catalog.facets'] });
      void qc.invalidateQueries({ queryKey: ['catalog.byName'] });
      onDone();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setTouched(true);
    if (Object.keys(errors).length === 0) save.mutate();
  };
  const field = (k: keyof Draft, label: string, opts: { hint?: string; placeholder?: string; type?: string; area?: boolean } = {}) => {
    const err = touched ? errors[k] : undefined;
    const value = d[k];
    if (typeof value === 'boolean') return null;
    const common = {
      id: `${id}-${k}`,
      value,
      placeholder: opts.placeholder,
      'aria-invalid': err ? true : undefined,
      'aria-describedby': err ? `${id}-${k}-err` : opts.hint ? `${id}-${k}-hint` : undefined,
      onChange: (e: { target: { value: string } }) => setD({ ...d, [k]: e.target.value }),
    };
    return (
      <div className="field">
        <label htmlFor={`${id}-${k}`}>{label}</label>
        {opts.area ? <textarea {...common} /> : <input type={opts.type ?? 'text'} {...common} />}
        {opts.hint && !err && (
          <p className="hint" id={`${id}-${k}-hint`}>
            {opts.hint}
          </p>
        )}
        {err && (
          <p className="field-error" id={`${id}-${k}-err`}>
            {err}
          </p>
        )}
      </div>
    );
  };
  return (
    <form className="form entry-form" onSubmit={submit} noValidate aria-label={entry ? `Edit ${entry.name}` : 'New catalog entry'}>
      {field('name', 'Name', { hint: 'Exact model identifier, sent as `model`' })}
      {field('provider', 'Provider')}
      <div className="row">
        {field('parameterSize', 'Parameter Size', { placeholder: '70B', hint: 'Form "<number>B"' })}
        {field('gpuCount', 'GPU Count', { placeholder: '4' })}
        {field('contextLength', 'Context Length', { placeholder: '131072', hint: 'Tokens' })}
      </div>
      <div className="row">
        {field('concurrency', 'Concurrency', { placeholder: '2x', hint: 'Form "<number>x"' })}
        {field('coldStartTtft', 'Cold Start TTFT', { placeholder: '5 sec', hint: 'Form "<number> sec"' })}
      </div>
      <div className="row">
        {field('priceIn', 'Input price ($ per 1M tokens)', { placeholder: '0.20' })}
        {field('priceOut', 'Output price ($ per 1M tokens)', { placeholder: '0.60' })}
        {field('priceGpuHour', 'Dedicated ($ per GPU-hour)', { placeholder: '2.50' })}
      </div>
      {field('useCases', 'Recommended Use Cases', { placeholder: 'Chat, Coding', hint: 'Comma-separated' })}
      {field('tags', 'Tags', { placeholder: 'coding-tool, long-context', hint: 'Comma-separated' })}
      {field('summary', 'Summary', { area: true, hint: `Empty shows "${DEFAULT_SUMMARY}"` })}
      {field('detailedIntro', 'Detailed Intro', { area: true })}
      <fieldset>
        <legend>Offered as</legend>
        <label className="checkbox">
          <input type="checkbox" checked={d.offeredShared} onChange={(e) => setD({ ...d, offeredShared: e.target.checked })} /> Shared (token-billed)
        </label>
        <label className="checkbox">
          <input type="checkbox" checked={d.offeredDedicated} onChange={(e) => setD({ ...d, offeredDedicated: e.target.checked })} /> Dedicated
        </label>
      </fieldset>
      <div className="row">
        <button type="submit" className="primary" disabled={save.isPending}>
          {save.isPending ? 'Saving…' : entry ? 'Save changes' : 'Create entry'}
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      {touched && Object.keys(errors).length > 0 && (
        <p className="field-error" role="alert">
          Fix the fields marked above.
        </p>
      )}
      {save.isError && <ErrorBox error={save.error} />}
    </form>
  );
}

export function AdminCatalog() {
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['catalog.admin.list'], queryFn: () => api.catalog.adminList() });
  const [editing, setEditing] = useState<AdminCatalogEntry | 'new' | null>(null);
  const toggle = useMutation({
    mutationFn: (e: AdminCatalogEntry) => (e.published ? api.catalog.unpublish(e.id) : api.catalog.publish(e.id)),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['catalog.admin.list'] });
      void qc.invalidateQueries({ queryKey: ['catalog.list'] });
      void qc.invalidateQueries({ queryKey: ['catalog.facets'] });
    },
  });
  if (editing) {
    return (
      <div className="panel">
        <h2>{editing === 'new' ? 'New catalog entry' : `Edit ${editing.name}`}</h2>
        <EntryForm entry={editing === 'new' ? null : editing} onDone={() => setEditing(null)} />
        {editing !== 'new' && <UpstreamsEditor entry={editing} />}
      </div>
    );
  }
  return (
    <>
      <div className="row">
        <button type="button" className="primary" onClick={() => setEditing('new')}>
          New entry
        </button>
      </div>
      {toggle.isError && <ErrorBox error={toggle.error} />}
      <QueryView query={list} what="catalog entries">
        {(entries) =>
          entries.length === 0 ? (
            <Empty>The catalog is empty.</Empty>
          ) : (
            <DataTable
              className="stack-table"
              head={
                <>
                  <th scope="col">Name</th>
                  <th scope="col">Provider</th>
                  <th scope="col">Modes</th>
                  <th scope="col">Status</th>
                  <th scope="col">Updated</th>
                  <ActionsHeader />
                </>
              }
            >
              {entries.map((e) => (
                <tr key={e.id}>
                  <td data-label="Name" className="name-cell">
                    {e.name}
                  </td>
                  <td data-label="Provider">{providerLabel(e.provider) || '—'}</td>
                  <td data-label="Modes">{[e.offeredShared && 'shared', e.offeredDedicated && 'dedicated'].filter(Boolean).join(', ') || '—'}</td>
                  <td data-label="Status">
                    <span className={`state-badge ${e.published ? 's-active' : ''}`}>{e.published ? 'published' : 'draft'}</span>
                  </td>
                  <td data-label="Updated" className="nowrap">
                    {formatShortDate(e.updatedAt)}
                  </td>
                  <td className="row actions-cell">
                    <button type="button" onClick={() => setEditing(e)} aria-label={`Edit ${e.name}`}>
                      Edit
                    </button>
                    <button
                      type="button"
                      onClick={() => toggle.mutate(e)}
                      disabled={toggle.isPending}
                      aria-label={`${e.published ? 'Unpublish' : 'Publish'} ${e.name}`}
                    >
                      {e.published ? 'Unpublish' : 'Publish'}
                    </button>
                  </td>
                </tr>
              ))}
            </DataTable>
          )
        }
      </QueryView>
    </>
  );
}
