import { useQuery } from '@tanstack/react-query';
import { useState, type ReactNode } from 'react';
import { dedicatedBaseUrl, dedicatedModelName } from '@infer/shared/public-urls';
import { api, type CatalogEntry, type CreatedKey } from '../api.tsx';
import { CreateKeyForm, NewKeyNotice } from '../components/create-key.tsx';
import { IntegrationView } from '../components/integration.tsx';
import { ErrorBox, Loading } from '../components/states.tsx';
import { Tabs } from '../components/tabs.tsx';
import { Link } from '../router.tsx';
import { formatGpuHourPrice, formatTokenPrice, providerLabel } from '../lib/format.ts';
import { ContextLength } from './catalog.tsx';
import { StateBadge } from './deployments.tsx';
import { useSession } from '../session.tsx';

function Fields({ entry }: { entry: CatalogEntry }) {
  const observed = useQuery({
    queryKey: ['catalog.observedColdStart', entry.id],
    queryFn: () => api.catalog.observedColdStart(entry.id),
    enabled: entry.offeredDedicated,
  });
  const o = observed.data;
  const coldStart: ReactNode = (
    <>
      {entry.coldStartTtft || '—'}
      {o && o.samples > 0 && o.p50Seconds != null && (
        <span className="muted small" data-testid="observed-cold-start">
          {' '}
          · observed p50 {o.p50Seconds.toFixed(1)} s, p95 {(o.p95Seconds ?? o.p50Seconds).toFixed(1)} s ({o.samples} cold start{o.samples === 1 ? '' : 's'})
        </span>
      )}
    </>
  );
  const rows: [string, ReactNode][] = [
    ['Name', entry.name],
    ['Provider', providerLabel(entry.provider)],
    ['Parameter Size', entry.parameterSize],
    ['GPU Count', entry.gpuCount == null ? '' : String(entry.gpuCount)],
    ['Context Length', entry.contextLength == null ? '' : <ContextLength n={entry.contextLength} />],
    ['Concurrency', entry.concurrency],
    ['Cold Start TTFT', coldStart],
    ['Token Price', formatTokenPrice(entry.priceInputPerM, entry.priceOutputPerM)],
    ['Dedicated Price', formatGpuHourPrice(entry.dedicatedPricePerGpuHour)],
    ['Recommended Use Cases', entry.recommendedUseCases],
    ['Tags', entry.tags.join(', ')],
  ];
  return (
    <dl className="field-table">
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd className={v ? '' : 'muted'}>{v || '—'}</dd>
        </div>
      ))}
    </dl>
  );
}

export function EndpointPage({ name }: { name: string }) {
  const session = useSession();
  const entry = useQuery({ queryKey: ['catalog.byName', name], queryFn: () => api.catalog.byName(name) });
  const urls = useQuery({ queryKey: ['platform.urls'], queryFn: () => api.platform.urls(), staleTime: Infinity });
  const tenantId = session.tenantId;
  const deployments = useQuery({
    queryKey: ['deployments.list', tenantId],
    queryFn: () => api.deployments.list(tenantId as string),
    enabled: tenantId !== null,
  });
  const [mode, setMode] = useState<'shared' | 'dedicated'>('shared');
  const [created, setCreated] = useState<CreatedKey | null>(null);

  if (entry.isPending || urls.isPending) return <Loading what="Loading the endpoint" />;
  if (entry.isError || urls.isError)
    return (
      <ErrorBox
        error={entry.error ?? urls.error}
        retry={() => {
          void entry.refetch();
          void urls.refetch();
        }}
      />
    );
  const e = entry.data;
  if (!e) {
    return (
      <section>
        <h1>Endpoint not found</h1>
        <p>
          No published endpoint is called <code>{name}</code>. <Link to="/">Browse the catalog</Link>.
        </p>
      </section>
    );
  }
  const deployment =
    deployments.data?.find((d) => d.entryName === e.name && d.state !== 'stopped' && d.state !== 'failed') ??
    deployments.data?.find((d) => d.entryName === e.name);
  const tenant = session.tenant;
  const modes = [
    ...(e.offeredShared ? [{ key: 'shared' as const, label: 'Shared (token-billed)' }] : []),
    ...(e.offeredDedicated && tenant && deployment ? [{ key: 'dedicated' as const, label: 'Dedicated' }] : []),
  ];
  const current = modes.some((m) => m.key === mode) ? mode : (modes[0]?.key ?? 'shared');
  // The key on screen: one just created here, else none (the placeholder).
  const apiKey = created?.secret ?? null;

  return (
    <article className="endpoint">
      <p className="crumbs">
        <Link to="/">Catalog</Link> / {e.name}
      </p>
      <h1>{e.name}</h1>
      <p className="modes">
        Offered as: {e.offeredShared && <span className="pill">Shared, token-billed</span>} {e.offeredDedicated && <span className="pill">Dedicated GPU</span>}
        {!e.offeredShared && !e.offeredDedicated && <span className="muted">not currently offered</span>}
      </p>
      <section aria-labelledby="summary-h">
        <h2 id="summary-h">Summary</h2>
        <p data-testid="summary">{e.summary}</p>
      </section>
      <section aria-labelledby="fields-h">
        <h2 id="fields-h">Details</h2>
        <Fields entry={e} />
      </section>
      <section aria-labelledby="intro-h">
        <h2 id="intro-h">Detailed Intro</h2>
        {e.detailedIntro ? (
          <div className="intro">
            {e.detailedIntro.split(/\n{2,}/).map((p, i) => (
              <p key={i}>{p}</p>
            ))}
          </div>
        ) : (
          <p className="muted">No detailed introduction yet.</p>
        )}
      </section>
      <section aria-labelledby="integrate-h" className="integrate">
        <h2 id="integrate-h">Integrate</h2>
        {!session.me && (
          <p className="muted">
            <Link to={`/login?next=${encodeURIComponent(`/endpoints/${encodeURIComponent(e.name)}`)}`}>Log in</Link> to get an API key, your tenant-scoped
            dedicated URL and the playground. The key slot shows a placeholder until then.
          </p>
        )}
        {session.me && e.offeredDedicated && !deployment && (
          <p className="muted">
            Your tenant has no dedicated deployment of this endpoint. <Link to={`/deployments?entry=${encodeURIComponent(e.name)}`}>Deploy it</Link> to get a
            tenant-scoped URL.
          </p>
        )}
        {session.me && tenant && (
          <div className="key-box">
            {created ? (
              <NewKeyNotice created={created} onDismiss={() => setCreated(null)} />
            ) : (
              <details>
                <summary>Create an API key for these snippets</summary>
                <CreateKeyForm compact defaultName={`${e.name} snippets`} onCreated={setCreated} />
              </details>
            )}
          </div>
        )}
        {modes.length === 0 ? (
          <p className="muted">This endpoint is offered only as dedicated; deploy it to call it.</p>
        ) : (
          <Tabs label="Mode" tabs={modes} value={current} onChange={setMode}>
            {current === 'shared' ? (
              <IntegrationView mode="shared" baseUrl={urls.data.sharedBaseUrl} model={e.name} apiKey={apiKey} />
            ) : tenant && deployment ? (
              <>
                <p className="muted small">
                  Deployment: <StateBadge state={deployment.state} /> {deployment.readyReplicas} / {deployment.desiredReplicas} replicas ready ·{' '}
                  <Link to={`/deployments/${deployment.id}`}>details</Link>
                </p>
                <IntegrationView
                  mode="dedicated"
                  baseUrl={dedicatedBaseUrl(urls.data, tenant.slug, e.name)}
                  model={dedicatedModelName(e.name, e.provider)}
                  apiKey={apiKey}
                />
              </>
            ) : null}
          </Tabs>
        )}
        {session.me && (
          <p>
            <Link to={`/playground?endpoint=${encodeURIComponent(e.name)}${current === 'dedicated' ? '&mode=dedicated' : ''}`}>Open in the playground</Link>
          </p>
        )}
      </section>
    </article>
  );
}
