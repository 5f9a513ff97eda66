import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { api, type Deployment } from '../api.tsx';
import { ConfirmDialog } from '../components/confirm.tsx';
import { CopyButton } from '../components/copy-button.tsx';
import { Empty, ErrorBox, Loading, QueryView } from '../components/states.tsx';
import { formatDate } from '../lib/format.ts';
import { Link, useRouter } from '../router.tsx';
import { useSession } from '../session.tsx';
import { dedicatedBaseUrl, dedicatedModelName } from './endpoint.tsx';

const SETTLED = new Set(['running', 'stopped', 'failed']);

function DeployForm({ tenantId }: { tenantId: string }) {
  const id = useId();
  const { location } = useRouter();
  const qc = useQueryClient();
  const entries = useQuery({ queryKey: ['catalog.list', {}], queryFn: () => api.catalog.list({}) });
  const dedicated = entries.data?.filter((e) => e.offeredDedicated) ?? [];
  const [entryName, setEntryName] = useState(location.query.get('entry') ?? '');
  const [min, setMin] = useState('1');
  const [max, setMax] = useState('1');
  const chosen = entryName || dedicated[0]?.name || '';
  const create = useMutation({
    mutationFn: () => api.deployments.create(tenantId, chosen, Number(min), Number(max)),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['deployments.list'] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };
  if (entries.isPending) return <Loading what="Loading dedicated-capable endpoints" />;
  if (entries.isError) return <ErrorBox error={entries.error} retry={() => void entries.refetch()} />;
  if (dedicated.length === 0) return <Empty>No published endpoint is offered as dedicated yet.</Empty>;
  return (
    <form className="form inline" onSubmit={submit} aria-label="Deploy a dedicated endpoint">
      <div className="field">
        <label htmlFor={`${id}-entry`}>Endpoint</label>
        <select id={`${id}-entry`} value={chosen} onChange={(e) => setEntryName(e.target.value)}>
          {dedicated.map((e) => (
            <option key={e.id} value={e.name}>
              {e.name}
              {e.gpuCount ? ` (${e.gpuCount} GPU${e.gpuCount === 1 ? '' : 's'})` : ''}
            </option>
          ))}
        </select>
      </div>
      <div className="field">
        <label htmlFor={`${id}-min`}>Min replicas</label>
        <input id={`${id}-min`} type="number" min={0} max={8} required value={min} onChange={(e) => setMin(e.target.value)} />
        <p className="hint">0 scales to zero when idle</p>
      </div>
      <div className="field">
        <label htmlFor={`${id}-max`}>Max replicas</label>
        <input id={`${id}-max`} type="number" min={1} max={8} required value={max} onChange={(e) => setMax(e.target.value)} />
      </div>
      <button type="submit" className="primary" disabled={create.isPending || !chosen}>
        {create.isPending ? 'Deploying…' : 'Deploy'}
      </button>
      {create.isError && <ErrorBox error={create.error} />}
    </form>
  );
}

function ScaleForm({ d, tenantId }: { d: Deployment; tenantId: string }) {
  const id = useId();
  const qc = useQueryClient();
  const [min, setMin] = useState(String(d.minReplicas));
  const [max, setMax] = useState(String(d.maxReplicas));
  const scale = useMutation({
    mutationFn: () => api.deployments.scale(tenantId, d.id, Number(min), Number(max)),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['deployments.list'] }),
  });
  return (
    <form className="form inline" onSubmit={(e) => { e.preventDefault(); scale.mutate(); }} aria-label={`Scale ${d.entryName}`}>
      <div className="field">
        <label htmlFor={`${id}-min`}>Min</label>
        <input id={`${id}-min`} type="number" min={0} max={8} required value={min} onChange={(e) => setMin(e.target.value)} />
      </div>
      <div className="field">
        <label htmlFor={`${id}-max`}>Max</label>
        <input id={`${id}-max`} type="number" min={1} max={8} required value={max} onChange={(e) => setMax(e.target.value)} />
      </div>
      <button type="submit" disabled={scale.isPending}>{scale.isPending ? 'Scaling…' : 'Scale'}</button>
      {scale.isError && <ErrorBox error={scale.error} />}
    </form>
  );
}

function DeploymentCard({ d, tenantId, tenantSlug }: { d: Deployment; tenantId: string; tenantSlug: string }) {
  const qc = useQueryClient();
  const urls = useQuery({ queryKey: ['platform.urls'], queryFn: () => api.platform.urls(), staleTime: Infinity });
  const [confirmDelete, setConfirmDelete] = useState(false);
  const done = () => void qc.invalidateQueries({ queryKey: ['deployments.list'] });
  const stop = useMutation({ mutationFn: () => api.deployments.stop(tenantId, d.id), onSuccess: done });
  const start = useMutation({ mutationFn: () => api.deployments.start(tenantId, d.id), onSuccess: done });
  const del = useMutation({ mutationFn: () => api.deployments.delete(tenantId, d.id), onSuccess: () => { setConfirmDelete(false); done(); } });
  const url = urls.data ? dedicatedBaseUrl(urls.data, tenantSlug, d.entryName) : '';
  const model = dedicatedModelName(d.entryName, d.provider);
  return (
    <li className="card deployment" data-deployment={d.entryName} data-state={d.state}>
      <h3>
        <Link to={`/endpoints/${encodeURIComponent(d.entryName)}`}>{d.entryName}</Link>{' '}
        <span className={`state-badge s-${d.state}`} data-testid="deployment-state">{d.state}</span>
      </h3>
      <dl className="facts">
        <div><dt>Replicas ready</dt><dd data-testid="replicas">{d.readyReplicas} / {d.replicas.length}</dd></div>
        <div><dt>Min / max</dt><dd>{d.minReplicas} / {d.maxReplicas}</dd></div>
        <div><dt>Provisioner</dt><dd>{d.provisioner}</dd></div>
        <div><dt>Updated</dt><dd>{formatDate(d.updatedAt)}</dd></div>
      </dl>
      {d.lastError && <p className="state error" role="alert">{d.lastError}</p>}
      <div className="client-values">
        <div>
          <dt>API Base URL</dt>
          <dd><code data-testid="deployment-url">{url}</code> {url && <CopyButton text={url} label="Copy API Base URL" />}</dd>
        </div>
        <div>
          <dt>Model Name</dt>
          <dd><code>{model}</code> <CopyButton text={model} label="Copy Model Name" /></dd>
        </div>
      </div>
      {d.replicas.length > 0 && (
        <details>
          <summary>Replicas</summary>
          <ul>
            {d.replicas.map((r) => (
              <li key={r.id}><span className={`state-badge s-${r.state}`}>{r.state}</span> {r.kind} · {r.servedModel}</li>
            ))}
          </ul>
        </details>
      )}
      {d.state !== 'stopped' && <ScaleForm d={d} tenantId={tenantId} />}
      <div className="row">
        {d.state === 'stopped' || d.state === 'failed' ? (
          <button type="button" onClick={() => start.mutate()} disabled={start.isPending}>Start</button>
        ) : (
          <button type="button" onClick={() => stop.mutate()} disabled={stop.isPending}>{stop.isPending ? 'Stopping…' : 'Stop'}</button>
        )}
        <button type="button" className="danger" onClick={() => setConfirmDelete(true)}>Delete</button>
      </div>
      {(stop.isError || start.isError) && <ErrorBox error={stop.error ?? start.error} />}
      <ConfirmDialog
        open={confirmDelete}
        title={`Delete ${d.entryName}?`}
        confirmLabel={del.isPending ? 'Deleting…' : 'Delete deployment'}
        danger
        busy={del.isPending}
        onConfirm={() => del.mutate()}
        onCancel={() => { setConfirmDelete(false); del.reset(); }}
      >
        <p>Its replicas stop and its URL stops answering. The shared endpoint is not affected.</p>
        {del.isError && <ErrorBox error={del.error} />}
      </ConfirmDialog>
    </li>
  );
}

export function DeploymentsPage() {
  const session = useSession();
  const tenantId = session.tenantId as string;
  const tenantSlug = session.tenant?.slug ?? '';
  const list = useQuery({
    queryKey: ['deployments.list', tenantId],
    queryFn: () => api.deployments.list(tenantId),
    // Poll fast while something is changing, slowly otherwise.
    refetchInterval: (q) => (q.state.data?.some((d) => !SETTLED.has(d.state)) ? 1000 : 5000),
  });
  return (
    <section>
      <h1>Dedicated deployments</h1>
      <p className="muted">
        A dedicated deployment serves one catalog endpoint on GPU capacity reserved for your tenant, at a tenant-scoped URL. It is billed by
        replica GPU time.
      </p>
      <div className="panel">
        <h2>Deploy</h2>
        <DeployForm tenantId={tenantId} />
      </div>
      <h2>Your deployments</h2>
      <QueryView query={list} what="deployments">
        {(ds) =>
          ds.length === 0 ? (
            <Empty>No dedicated deployments yet.</Empty>
          ) : (
            <ul className="deploy-list" aria-live="polite">
              {ds.map((d) => <DeploymentCard key={d.id} d={d} tenantId={tenantId} tenantSlug={tenantSlug} />)}
            </ul>
          )
        }
      </QueryView>
    </section>
  );
}
