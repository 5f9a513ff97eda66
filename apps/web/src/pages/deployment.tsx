import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { dedicatedBaseUrl, dedicatedModelName } from '@infer/shared/public-urls';
import { api, type Deployment } from '../api.tsx';
import { AutoscalingFields, scalingErrors, toAutoscaling, type ScalingDraft } from '../components/autoscaling-fields.tsx';
import { ConfirmDialog } from '../components/confirm.tsx';
import { DeploymentClientValues } from '../components/deployment-client-values.tsx';
import { ErrorBox, Loading } from '../components/states.tsx';
import { TimeChart } from '../components/time-chart.tsx';
import { formatGpuHours, formatSeconds, formatShortDate, formatUsd } from '../lib/format.ts';
import { useReplicaHistory } from '../lib/replica-history.ts';
import { Link, useRouter } from '../router.tsx';
import { useSession } from '../session.tsx';
import { DedicatedPrice, SETTLED, StateBadge } from './deployments.tsx';
import { isNotFound } from '../trpc.tsx';

const PERIODS = [
  { key: '1h', label: 'Last hour', ms: 3_600_000 },
  { key: '24h', label: '24 hours', ms: 86_400_000 },
  { key: '7d', label: '7 days', ms: 7 * 86_400_000 },
  { key: '30d', label: '30 days', ms: 30 * 86_400_000 },
] as const;
type PeriodKey = (typeof PERIODS)[number]['key'];

const draftOf = (d: Deployment): ScalingDraft => ({
  min: String(d.minReplicas),
  max: String(d.maxReplicas),
  target: d.autoscaling.targetConcurrencyIsDefault ? '' : String(d.autoscaling.targetConcurrency),
  toZero: String(d.autoscaling.scaleToZeroAfterSeconds),
  downDelay: String(d.autoscaling.scaleDownDelaySeconds),
});

function AutoscalingForm({ d, tenantId }: { d: Deployment; tenantId: string }) {
  const qc = useQueryClient();
  const [draft, setDraft] = useState<ScalingDraft>(() => draftOf(d));
  const [saved, setSaved] = useState(false);
  const errors = scalingErrors(draft);
  const dirty = JSON.stringify(draft) !== JSON.stringify(draftOf(d));
  const scale = useMutation({
    mutationFn: () => api.deployments.scale(tenantId, d.id, Number(draft.min), Number(draft.max), toAutoscaling(draft)),
    onSuccess: (next) => {
      setDraft(draftOf(next));
      setSaved(true);
      void qc.invalidateQueries({ queryKey: ['deployments'] });
      void qc.invalidateQueries({ queryKey: ['deployments.list'] });
    },
  });
  return (
    <form
      className="form wide"
      noValidate
      aria-label="Autoscaling settings"
      onSubmit={(e) => {
        e.preventDefault();
        setSaved(false);
        if (Object.keys(errors).length === 0) scale.mutate();
      }}
    >
      <AutoscalingFields
        draft={draft}
        onChange={(x) => {
          setDraft(x);
          setSaved(false);
        }}
        errors={errors}
        defaultTarget={d.autoscaling.targetConcurrencyIsDefault ? d.autoscaling.targetConcurrency : null}
      />
      <div className="row">
        <button type="submit" className="primary" disabled={scale.isPending || !dirty || Object.keys(errors).length > 0}>
          {scale.isPending ? 'Saving…' : 'Save autoscaling'}
        </button>
        <button
          type="button"
          onClick={() => {
            setDraft(draftOf(d));
            setSaved(false);
          }}
          disabled={!dirty}
        >
          Reset
        </button>
        {saved && !dirty && (
          <span role="status" className="muted small">
            Saved.
          </span>
        )}
      </div>
      {scale.isError && <ErrorBox error={scale.error} />}
    </form>
  );
}

function ColdStarts({ d, tenantId }: { d: Deployment; tenantId: string }) {
  const q = useQuery({ queryKey: ['deployments', 'coldStarts', d.id], queryFn: () => api.deployments.coldStarts(tenantId, d.id), refetchInterval: 5000 });
  if (q.isPending) return <Loading what="Loading cold starts" />;
  if (q.isError) return <ErrorBox error={q.error} retry={() => void q.refetch()} />;
  const c = q.data;
  const s = (v: number | null) => (v == null ? '—' : `${v.toFixed(2)} s`);
  return (
    <>
      <dl className="totals">
        <div>
          <dt>Stated cold start TTFT</dt>
          <dd>{c.statedSeconds == null ? '—' : `${c.statedSeconds} s`}</dd>
        </div>
        <div>
          <dt>Observed p50</dt>
          <dd data-testid="cold-p50">{s(c.entry.p50Seconds)}</dd>
        </div>
        <div>
          <dt>Observed p95</dt>
          <dd>{s(c.entry.p95Seconds)}</dd>
        </div>
        <div>
          <dt>Samples (this model)</dt>
          <dd>{c.entry.samples}</dd>
        </div>
      </dl>
      {c.recent.length === 0 ? (
        <p className="muted">No request has waited for a cold start of this deployment yet.</p>
      ) : (
        <div className="table-wrap">
          <table className="compact-table" data-testid="cold-starts">
            <caption className="visually-hidden">Recent cold starts</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col" className="num">
                  Waited for a replica
                </th>
                <th scope="col" className="num">
                  Time to first token
                </th>
              </tr>
            </thead>
            <tbody>
              {c.recent.map((r, i) => (
                <tr key={`${String(r.recordedAt)}-${i}`}>
                  <td className="nowrap">{formatShortDate(r.recordedAt)}</td>
                  <td className="num">{(r.waitMs / 1000).toFixed(2)} s</td>
                  <td className="num">{(r.ttftMs / 1000).toFixed(2)} s</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

/** The phases a deployment's GPU time splits into, in the order they are listed. */
const GPU_PHASES = [
  { key: 'boot', label: 'Boot' },
  { key: 'serving', label: 'Serving' },
  { key: 'idle', label: 'Idle' },
] as const;

function GpuTime({ d, tenantId, price }: { d: Deployment; tenantId: string; price: number | null }) {
  const [period, setPeriod] = useState<PeriodKey>('24h');
  const ms = PERIODS.find((p) => p.key === period)?.ms ?? 86_400_000;
  // Rounded to the minute so the query key is stable between polls.
  const to = new Date(Math.ceil(Date.now() / 60_000) * 60_000);
  const from = new Date(to.getTime() - ms);
  const q = useQuery({
    queryKey: ['deployments', 'gpuSeconds', d.id, period, to.toISOString()],
    queryFn: () => api.deployments.gpuSeconds(tenantId, d.id, from.toISOString(), to.toISOString()),
    placeholderData: keepPreviousData,
    refetchInterval: 10_000,
  });
  const cost = (s: number) => (price == null ? '—' : formatUsd((s / 3600) * price));
  return (
    <>
      <div className="row" role="group" aria-label="Period">
        {PERIODS.map((p) => (
          <button key={p.key} type="button" aria-pressed={period === p.key} className={period === p.key ? 'chip on' : 'chip'} onClick={() => setPeriod(p.key)}>
            {p.label}
          </button>
        ))}
      </div>
      {q.isPending ? (
        <Loading what="Loading GPU time" />
      ) : q.isError ? (
        <ErrorBox error={q.error} retry={() => void q.refetch()} />
      ) : (
        <dl className="totals">
          <div>
            <dt>GPU time</dt>
            <dd data-testid="gpu-hours">{formatGpuHours(q.data.total)}</dd>
          </div>
          <div>
            <dt>Cost</dt>
            <dd data-testid="gpu-cost">{cost(q.data.total)}</dd>
          </div>
          {GPU_PHASES.map((p) => (
            <div key={p.key}>
              <dt>{p.label}</dt>
              <dd className="sub">
                {formatGpuHours(q.data[p.key])} · {cost(q.data[p.key])}
              </dd>
            </div>
          ))}
        </dl>
      )}
    </>
  );
}

export function DeploymentPage({ id }: { id: string }) {
  const session = useSession();
  const { navigate } = useRouter();
  const qc = useQueryClient();
  const tenantId = session.tenantId as string;
  const tenantSlug = session.tenant?.slug ?? '';
  const q = useQuery({
    queryKey: ['deployments', 'get', tenantId, id],
    queryFn: () => api.deployments.get(tenantId, id),
    refetchInterval: (x) => (x.state.data && SETTLED.has(x.state.data.state) && x.state.data.readyReplicas === x.state.data.desiredReplicas ? 3000 : 1000),
  });
  const urls = useQuery({ queryKey: ['platform.urls'], queryFn: () => api.platform.urls(), staleTime: Infinity });
  const entries = useQuery({ queryKey: ['catalog.list', {}], queryFn: () => api.catalog.list({}) });
  const d = q.data;
  const history = useReplicaHistory(id, d ? { ready: d.readyReplicas, desired: d.desiredReplicas } : undefined, q.dataUpdatedAt);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const refresh = () => {
    void qc.invalidateQueries({ queryKey: ['deployments'] });
    void qc.invalidateQueries({ queryKey: ['deployments.list'] });
  };
  const wake = useMutation({ mutationFn: () => api.deployments.wake(tenantId, id), onSuccess: refresh });
  const stop = useMutation({ mutationFn: () => api.deployments.stop(tenantId, id), onSuccess: refresh });
  const start = useMutation({ mutationFn: () => api.deployments.start(tenantId, id), onSuccess: refresh });
  const del = useMutation({
    mutationFn: () => api.deployments.delete(tenantId, id),
    onSuccess: () => {
      setConfirmDelete(false);
      refresh();
      navigate('/deployments');
    },
  });

  if (q.isPending) return <Loading what="Loading the deployment" />;
  if (q.isError) {
    return (
      <section>
        <p className="crumbs">
          <Link to="/deployments">Deployments</Link>
        </p>
        {isNotFound(q.error) ? (
          <>
            <h1>Deployment not found</h1>
            <p>No deployment of your tenant has this id: it was deleted, or the link is wrong.</p>
          </>
        ) : (
          <ErrorBox error={q.error} retry={() => void q.refetch()} />
        )}
      </section>
    );
  }
  const dep = q.data;
  const entry = entries.data?.find((e) => e.id === dep.entryId || e.name === dep.entryName);
  const url = urls.data ? dedicatedBaseUrl(urls.data, tenantSlug, dep.entryName) : '';
  const model = dedicatedModelName(dep.entryName, dep.provider);
  const canWake = dep.state !== 'stopped' && dep.state !== 'failed';
  // The current counts extend to now, so a steady deployment still draws a line from the first observation.
  const nowPoint = { t: Math.floor(Date.now() / 1000), ready: dep.readyReplicas, desired: dep.desiredReplicas };
  const series = [...history.filter((h) => h.t < nowPoint.t - 1), nowPoint];
  if (series.length === 1) series.unshift({ ...nowPoint, t: nowPoint.t - 1 });

  return (
    <article className="deployment-page" data-deployment={dep.entryName} data-state={dep.state}>
      <p className="crumbs">
        <Link to="/deployments">Deployments</Link> / {dep.entryName}
      </p>
      <div className="page-title">
        <h1>{dep.entryName}</h1>
        <StateBadge state={dep.state} />
      </div>
      <div className="row toolbar">
        {canWake && (
          <button
            type="button"
            className="primary"
            onClick={() => wake.mutate()}
            disabled={wake.isPending || (dep.state === 'running' && dep.readyReplicas > 0)}
            title="Start a replica now, ahead of traffic"
          >
            {wake.isPending ? 'Waking…' : 'Wake'}
          </button>
        )}
        {dep.state === 'stopped' || dep.state === 'failed' ? (
          <button type="button" onClick={() => start.mutate()} disabled={start.isPending}>
            Start
          </button>
        ) : (
          <button type="button" onClick={() => stop.mutate()} disabled={stop.isPending}>
            {stop.isPending ? 'Stopping…' : 'Stop'}
          </button>
        )}
        <button type="button" className="danger" onClick={() => setConfirmDelete(true)}>
          Delete
        </button>
        <Link to={`/playground?endpoint=${encodeURIComponent(dep.entryName)}&mode=dedicated`} className="button">
          Open in the playground
        </Link>
      </div>
      {(wake.isError || stop.isError || start.isError) && <ErrorBox error={wake.error ?? stop.error ?? start.error} />}
      {wake.isSuccess && dep.readyReplicas === 0 && dep.state !== 'scaled_to_zero' && (
        <p role="status" className="muted small">
          Waking: a replica is starting (cold start {entry?.coldStartTtft || 'in progress'}).
        </p>
      )}

      <dl className="totals">
        <div>
          <dt>Ready / desired replicas</dt>
          <dd data-testid="replicas">
            {dep.readyReplicas} / {dep.desiredReplicas}
          </dd>
        </div>
        <div>
          <dt>Min / max</dt>
          <dd>
            {dep.minReplicas} / {dep.maxReplicas}
          </dd>
        </div>
        <div>
          <dt>Target concurrency</dt>
          <dd>
            {dep.autoscaling.targetConcurrency}
            {dep.autoscaling.targetConcurrencyIsDefault ? <span className="muted small"> (default)</span> : null}
          </dd>
        </div>
        <div>
          <dt>Scale to zero after</dt>
          <dd>{formatSeconds(dep.autoscaling.scaleToZeroAfterSeconds)}</dd>
        </div>
      </dl>
      <p className="small">
        <span className="muted">Last scaling decision:</span> <span data-testid="last-scale-reason">{dep.lastScaleReason ?? 'none yet'}</span>
        {dep.lastScaleAt ? <span className="muted"> ({formatShortDate(dep.lastScaleAt)})</span> : null}
      </p>
      {dep.lastError && (
        <p className="state error" role="alert">
          Last error: {dep.lastError}
        </p>
      )}

      <DeploymentClientValues url={url} model={model} />

      <section aria-labelledby="replicas-h">
        <h2 id="replicas-h">Replicas over time</h2>
        <TimeChart
          title="Ready and desired replicas"
          testId="replica-chart"
          kind="steps"
          x={series.map((p) => p.t)}
          series={[
            { label: 'Desired', values: series.map((p) => p.desired), color: '#93370d' },
            { label: 'Ready', values: series.map((p) => p.ready), color: '#2453d4' },
          ]}
          integer
          format={(n) => (Number.isInteger(n) ? String(n) : '')}
          xLabel={(t) => new Date(t * 1000).toLocaleTimeString()}
          height={200}
        />
        <p className="muted small">Observed by this browser tab while the page is open (kept for this tab, up to six hours).</p>
        {dep.replicas.length > 0 && (
          <ul className="replica-list">
            {dep.replicas.map((r) => (
              <li key={r.id}>
                <span className={`state-badge s-${r.state}`}>{r.state}</span>{' '}
                <span className="muted small">
                  {r.kind} · since {formatShortDate(r.createdAt)}
                </span>
              </li>
            ))}
          </ul>
        )}
      </section>

      <section aria-labelledby="cold-h">
        <h2 id="cold-h">Cold starts</h2>
        <ColdStarts d={dep} tenantId={tenantId} />
      </section>

      <section aria-labelledby="gpu-h">
        <h2 id="gpu-h">GPU time and cost</h2>
        {entry && (
          <p className="small">
            <DedicatedPrice entry={entry} />
          </p>
        )}
        <GpuTime d={dep} tenantId={tenantId} price={entry?.dedicatedPricePerGpuHour ?? null} />
      </section>

      <section aria-labelledby="autoscaling-h" className="panel">
        <h2 id="autoscaling-h">Autoscaling</h2>
        <AutoscalingForm key={dep.id} d={dep} tenantId={tenantId} />
      </section>

      <ConfirmDialog
        open={confirmDelete}
        title={`Delete ${dep.entryName}?`}
        confirmLabel={del.isPending ? 'Deleting…' : 'Delete deployment'}
        danger
        busy={del.isPending}
        onConfirm={() => del.mutate()}
        onCancel={() => {
          setConfirmDelete(false);
          del.reset();
        }}
      >
        <p>Its replicas stop and its URL stops answering. The shared endpoint is not affected.</p>
        {del.isError && <ErrorBox error={del.error} />}
      </ConfirmDialog>
    </article>
  );
}
