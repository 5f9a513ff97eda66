import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { dedicatedBaseUrl, dedicatedModelName } from '@infer/shared/public-urls';
import { api, type CatalogEntry, type Deployment } from '../api.tsx';
import { AutoscalingFields, DEFAULT_SCALING, scalingErrors, toAutoscaling, type ScalingDraft } from '../components/autoscaling-fields.tsx';
import { DeploymentClientValues } from '../components/deployment-client-values.tsx';
import { Empty, ErrorBox, Loading, QueryView } from '../components/states.tsx';
import { formatGpuHourPrice, formatUsd, providerLabel } from '../lib/format.ts';
import { Link, useRouter } from '../router.tsx';
import { useSession } from '../session.tsx';

/** States in which nothing is on its way: poll slowly. */
export const SETTLED = new Set(['running', 'stopped', 'failed', 'scaled_to_zero']);

export const STATE_LABELS: Readonly<Record<string, string>> = {
  pending: 'pending',
  provisioning: 'provisioning',
  running: 'running',
  scaling: 'scaling',
  scaled_to_zero: 'scaled to zero',
  stopped: 'stopped',
  failed: 'failed',
};

export function StateBadge({ state }: { state: string }) {
  return (
    <span className={`state-badge s-${state}`} data-testid="deployment-state">
      {STATE_LABELS[state] ?? state}
    </span>
  );
}

/** What one replica of the entry costs per hour: GPU-hour price x GPU Count. */
export function DedicatedPrice({ entry }: { entry: CatalogEntry }) {
  const gpus = entry.gpuCount ?? 1;
  if (entry.dedicatedPricePerGpuHour == null) return <span className="muted">No GPU-hour price set: GPU time is metered but not billed.</span>;
  return (
    <span data-testid="gpu-hour-price">
      <strong>{formatGpuHourPrice(entry.dedicatedPricePerGpuHour)}</strong> × {gpus} GPU{gpus === 1 ? '' : 's'} ={' '}
      <strong>{formatUsd(entry.dedicatedPricePerGpuHour * gpus)}</strong> per replica-hour, billed by the second while a replica runs (boot included); nothing
      while scaled to zero.
    </span>
  );
}

/** `deployed`: the entries the tenant has a deployment of (a tenant deploys an entry once), left out of the choice. */
function DeployForm({ tenantId, deployed }: { tenantId: string; deployed: ReadonlySet<string> }) {
  const id = useId();
  const { location, navigate } = useRouter();
  const qc = useQueryClient();
  const entries = useQuery({ queryKey: ['catalog.list', {}], queryFn: () => api.catalog.list({}) });
  const offered = entries.data?.filter((e) => e.offeredDedicated) ?? [];
  const dedicated = offered.filter((e) => !deployed.has(e.name));
  const [entryName, setEntryName] = useState(location.query.get('entry') ?? '');
  const [draft, setDraft] = useState<ScalingDraft>(DEFAULT_SCALING);
  const [touched, setTouched] = useState(false);
  const errors = scalingErrors(draft);
  const chosen = dedicated.find((e) => e.name === entryName) ?? dedicated[0];
  const create = useMutation({
    mutationFn: () => api.deployments.create(tenantId, chosen?.name ?? '', Number(draft.min), Number(draft.max), toAutoscaling(draft)),
    onSuccess: (d) => {
      void qc.invalidateQueries({ queryKey: ['deployments.list'] });
      navigate(`/deployments/${d.id}`);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setTouched(true);
    if (Object.keys(errors).length === 0 && chosen) create.mutate();
  };
  if (entries.isPending) return <Loading what="Loading dedicated-capable endpoints" />;
  if (entries.isError) return <ErrorBox error={entries.error} retry={() => void entries.refetch()} />;
  if (offered.length === 0) return <Empty>No published endpoint is offered as dedicated yet.</Empty>;
  if (dedicated.length === 0 || !chosen) return <Empty>Every endpoint offered as dedicated has a deployment here already: manage them below.</Empty>;
  return (
    <form className="form deploy-form" onSubmit={submit} noValidate aria-label="Deploy a dedicated endpoint">
      <div className="field">
        <label htmlFor={`${id}-entry`}>Endpoint</label>
        <select id={`${id}-entry`} value={chosen.name} onChange={(e) => setEntryName(e.target.value)}>
          {dedicated.map((e) => (
            <option key={e.id} value={e.name}>
              {e.name}
            </option>
          ))}
        </select>
        <p className="hint">
          {providerLabel(chosen.provider) || 'No provider'} · {chosen.gpuCount ?? 1} GPU{chosen.gpuCount === 1 ? '' : 's'} per replica
          {chosen.coldStartTtft ? ` · cold start ${chosen.coldStartTtft}` : ''}
        </p>
      </div>
      <p className="price-line">
        <DedicatedPrice entry={chosen} />
      </p>
      <fieldset>
        <legend>Autoscaling</legend>
        <AutoscalingFields draft={draft} onChange={setDraft} errors={touched ? errors : {}} />
      </fieldset>
      <div className="row">
        <button type="submit" className="primary" disabled={create.isPending}>
          {create.isPending ? 'Deploying…' : 'Deploy'}
        </button>
      </div>
      {touched && Object.keys(errors).length > 0 && (
        <p className="field-error" role="alert">
          Fix the fields marked above.
        </p>
      )}
      {create.isError && <ErrorBox error={create.error} />}
    </form>
  );
}

function DeploymentCard({ d, tenantId, tenantSlug }: { d: Deployment; tenantId: string; tenantSlug: string }) {
  const qc = useQueryClient();
  const urls = useQuery({ queryKey: ['platform.urls'], queryFn: () => api.platform.urls(), staleTime: Infinity });
  const wake = useMutation({
    mutationFn: () => api.deployments.wake(tenantId, d.id),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['deployments.list'] }),
  });
  const url = urls.data ? dedicatedBaseUrl(urls.data, tenantSlug, d.entryName) : '';
  const model = dedicatedModelName(d.entryName, d.provider);
  return (
    <li className="card deployment" data-deployment={d.entryName} data-state={d.state}>
      <h3 className="card-title">
        <Link to={`/deployments/${d.id}`}>{d.entryName}</Link> <StateBadge state={d.state} />
      </h3>
      <dl className="facts">
        <div>
          <dt>Ready / desired</dt>
          <dd data-testid="replicas">
            {d.readyReplicas} / {d.desiredReplicas}
          </dd>
        </div>
        <div>
          <dt>Min / max</dt>
          <dd>
            {d.minReplicas} / {d.maxReplicas}
          </dd>
        </div>
      </dl>
      {d.lastScaleReason && (
        <p className="small muted" title={d.lastScaleReason}>
          Last scaling: {d.lastScaleReason}
        </p>
      )}
      {d.lastError && (
        <p className="state error small" role="alert">
          {d.lastError}
        </p>
      )}
      <DeploymentClientValues url={url} model={model} compact />
      <div className="row">
        <Link to={`/deployments/${d.id}`} className="button">
          Details
        </Link>
        {d.state !== 'stopped' && d.state !== 'failed' && (
          <button type="button" onClick={() => wake.mutate()} disabled={wake.isPending || (d.readyReplicas > 0 && d.state === 'running')}>
            {wake.isPending ? 'Waking…' : 'Wake'}
          </button>
        )}
      </div>
      {wake.isError && <ErrorBox error={wake.error} />}
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
    refetchInterval: (q) => (q.state.data?.some((d) => !SETTLED.has(d.state) || d.readyReplicas !== d.desiredReplicas) ? 1000 : 5000),
  });
  return (
    <section>
      <h1>Dedicated deployments</h1>
      <p className="muted">
        A dedicated deployment serves one catalog endpoint on GPUs reserved for your tenant, at a tenant-scoped URL. It scales on load, to zero when idle
        (requests wait through the cold start), and is billed by replica GPU time.
      </p>
      <div className="panel">
        <h2>Deploy</h2>
        <DeployForm tenantId={tenantId} deployed={new Set(list.data?.map((d) => d.entryName))} />
      </div>
      <h2>Your deployments</h2>
      <QueryView query={list} what="deployments">
        {(ds) =>
          ds.length === 0 ? (
            <Empty>No dedicated deployments yet.</Empty>
          ) : (
            <ul className="deploy-list" aria-live="polite">
              {ds.map((d) => (
                <DeploymentCard key={d.id} d={d} tenantId={tenantId} tenantSlug={tenantSlug} />
              ))}
            </ul>
          )
        }
      </QueryView>
    </section>
  );
}
