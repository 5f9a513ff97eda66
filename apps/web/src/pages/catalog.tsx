import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api, type CatalogEntry } from '../api.tsx';
import { Empty, ErrorBox, Loading } from '../components/states.tsx';
import { formatContext, formatGpuHourPrice, formatInt, formatTokenPrice, providerLabel } from '../lib/format.ts';
import { Link, useRouter } from '../router.tsx';

/** Context length as users read it (128K), the exact number on hover. */
export function ContextLength({ n }: { n: number | null }) {
  if (n == null) return <>—</>;
  return (
    <abbr className="ctx" title={`${formatInt(n)} tokens`} data-exact={n}>
      {formatContext(n)}
    </abbr>
  );
}

/** The longest search the API's `catalog.list` takes (its input schema's `search` limit). */
const SEARCH_MAX = 200;

type FacetKey = 'provider' | 'tag' | 'useCase';
const FACETS: readonly { key: FacetKey; label: string; values: (e: CatalogEntry) => string[] }[] = [
  { key: 'provider', label: 'Provider', values: (e) => (e.provider ? [e.provider] : []) },
  { key: 'tag', label: 'Tag', values: (e) => e.tags },
  { key: 'useCase', label: 'Recommended use case', values: (e) => e.useCases },
];

/**
 * Counts of each facet value among `entries` (the catalog, or the server's answer to the search: the search rule has
 * one home, the catalog service) that match the other active filters.
 */
function facetCounts(entries: readonly CatalogEntry[], filters: Partial<Record<FacetKey, string>>, key: FacetKey) {
  const counts = new Map<string, number>();
  for (const e of entries) {
    const matchesOthers = FACETS.every((f) => f.key === key || !filters[f.key] || f.values(e).includes(filters[f.key] as string));
    if (!matchesOthers) continue;
    for (const v of FACETS.find((f) => f.key === key)!.values(e)) counts.set(v, (counts.get(v) ?? 0) + 1);
  }
  return counts;
}

export function EntryCard({ entry }: { entry: CatalogEntry }) {
  return (
    <li className="card entry-card">
      <h3>
        <Link to={`/endpoints/${encodeURIComponent(entry.name)}`}>{entry.name}</Link>
      </h3>
      <dl className="facts">
        <div>
          <dt>Provider</dt>
          <dd>{providerLabel(entry.provider) || '—'}</dd>
        </div>
        <div>
          <dt>Parameter Size</dt>
          <dd>{entry.parameterSize || '—'}</dd>
        </div>
        <div>
          <dt>Context Length</dt>
          <dd>
            <ContextLength n={entry.contextLength} />
          </dd>
        </div>
        <div>
          <dt>{entry.offeredShared ? 'Token Price' : 'GPU-hour price'}</dt>
          <dd>
            {(entry.offeredShared ? formatTokenPrice(entry.priceInputPerM, entry.priceOutputPerM) : formatGpuHourPrice(entry.dedicatedPricePerGpuHour)) || '—'}
          </dd>
        </div>
      </dl>
      <p className="modes">
        {entry.offeredShared && <span className="pill">Shared</span>}
        {entry.offeredDedicated && <span className="pill">Dedicated</span>}
      </p>
      {entry.tags.length > 0 && (
        <ul className="tags" aria-label="Tags">
          {entry.tags.map((t) => (
            <li key={t} className="tag">
              {t}
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

export function CatalogPage() {
  const { location, navigate } = useRouter();
  const filters: Partial<Record<FacetKey, string>> = {};
  for (const f of FACETS) {
    const v = location.query.get(f.key);
    if (v) filters[f.key] = v;
  }
  const urlSearch = location.query.get('q') ?? '';
  const [search, setSearch] = useState(urlSearch);
  useEffect(() => setSearch(urlSearch), [urlSearch]);

  const setParam = (key: string, value: string | null) => {
    const q = new URLSearchParams(location.query);
    if (value) q.set(key, value);
    else q.delete(key);
    const qs = q.toString();
    navigate(qs ? `/?${qs}` : '/', { replace: true });
  };

  // Debounce typing into the URL (the URL is the state, so links and reloads keep the view).
  useEffect(() => {
    if (search === urlSearch) return;
    const t = setTimeout(() => setParam('q', search.trim() || null), 250);
    return () => clearTimeout(t);
  });

  const all = useQuery({ queryKey: ['catalog.list', {}], queryFn: () => api.catalog.list({}) });
  // A longer search (pasted into the URL) is cut to what the API takes, not sent to be refused.
  const searchOnly = urlSearch.trim().slice(0, SEARCH_MAX);
  const input = { ...filters, ...(searchOnly ? { search: searchOnly } : {}) };
  const results = useQuery({ queryKey: ['catalog.list', input], queryFn: () => api.catalog.list(input), placeholderData: keepPreviousData });
  // What the search alone matches (name, provider or summary, as the server reads it): the facets count within it.
  const searched = useQuery({
    queryKey: ['catalog.list', { search: searchOnly }],
    queryFn: () => api.catalog.list({ search: searchOnly }),
    enabled: searchOnly !== '',
    placeholderData: keepPreviousData,
  });
  const facets = useQuery({ queryKey: ['catalog.facets'], queryFn: () => api.catalog.facets() });
  const active = Object.keys(filters).length > 0 || urlSearch !== '';
  // Phones: the facets fold behind a "Filters" control (CSS shows them always on wide screens).
  const [filtersOpen, setFiltersOpen] = useState(false);
  const activeCount = Object.keys(filters).length;

  return (
    <section className="catalog">
      <div className="page-head">
        <h1>Model catalog</h1>
        <p className="muted">
          Published endpoints you can call at once on the shared, token-billed surface, or deploy on dedicated GPUs. Browsing needs no login.
        </p>
      </div>
      <div className="catalog-layout">
        <aside className="filters" aria-label="Filters">
          <form
            role="search"
            onSubmit={(e) => {
              e.preventDefault();
              setParam('q', search.trim() || null);
            }}
          >
            <label htmlFor="catalog-search">Search</label>
            <input
              id="catalog-search"
              type="search"
              maxLength={SEARCH_MAX}
              value={search}
              placeholder="name, provider or summary"
              onChange={(e) => setSearch(e.target.value)}
            />
          </form>
          <button
            type="button"
            className="filters-toggle"
            aria-expanded={filtersOpen}
            aria-controls="catalog-facets"
            onClick={() => setFiltersOpen(!filtersOpen)}
          >
            Filters{activeCount > 0 ? ` (${activeCount})` : ''}
          </button>
          <div id="catalog-facets" className={`facets${filtersOpen ? ' open' : ''}`}>
            {facets.isPending || all.isPending ? (
              <Loading what="Loading filters" />
            ) : facets.isError || all.isError ? (
              <ErrorBox
                error={facets.error ?? all.error}
                retry={() => {
                  void facets.refetch();
                  void all.refetch();
                }}
              />
            ) : (
              FACETS.map((f) => {
                const values = f.key === 'provider' ? facets.data.providers : f.key === 'tag' ? facets.data.tags : facets.data.useCases;
                const counts = facetCounts((searchOnly === '' ? all.data : searched.data) ?? [], filters, f.key);
                return (
                  <fieldset key={f.key} className="facet">
                    <legend>{f.label}</legend>
                    {values.length === 0 ? (
                      <p className="muted small">None yet.</p>
                    ) : (
                      <ul>
                        {values.map((v) => {
                          const selected = filters[f.key] === v;
                          return (
                            <li key={v}>
                              <button
                                type="button"
                                className={`facet-value${selected ? ' selected' : ''}`}
                                aria-pressed={selected}
                                data-facet={f.key}
                                onClick={() => setParam(f.key, selected ? null : v)}
                              >
                                <span>{f.key === 'provider' ? providerLabel(v) : v}</span> <span className="count">{counts.get(v) ?? 0}</span>
                              </button>
                            </li>
                          );
                        })}
                      </ul>
                    )}
                  </fieldset>
                );
              })
            )}
          </div>
          {active && (
            <button type="button" className="link-button" onClick={() => navigate('/', { replace: true })}>
              Clear filters
            </button>
          )}
        </aside>
        <div className="results" aria-live="polite" aria-busy={results.isFetching}>
          {results.isPending ? (
            <Loading what="Loading the catalog" />
          ) : results.isError ? (
            <ErrorBox error={results.error} retry={() => void results.refetch()} />
          ) : results.data.length === 0 ? (
            <Empty>{active ? 'No published endpoint matches these filters.' : 'No endpoints have been published yet.'}</Empty>
          ) : (
            <>
              <p className="muted small">
                {results.data.length} endpoint{results.data.length === 1 ? '' : 's'}
              </p>
              <ul className="cards">
                {results.data.map((e) => (
                  <EntryCard key={e.id} entry={e} />
                ))}
              </ul>
            </>
          )}
        </div>
      </div>
    </section>
  );
}
