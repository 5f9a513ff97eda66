import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type UsageSummary } from '../api.tsx';
import { Empty, QueryView } from '../components/states.tsx';
import { TimeChart } from '../components/time-chart.tsx';
import { formatGpuHours, formatInt, formatUsd, isoDay, toCsv } from '../lib/format.ts';
import { useSession } from '../session.tsx';
import { DataTable } from '../components/data-table.tsx';

const DAY = 86_400_000;
const PRESETS = [
  { days: 1, label: 'Today' },
  { days: 7, label: '7 days' },
  { days: 14, label: '14 days' },
  { days: 30, label: '30 days' },
  { days: 90, label: '90 days' },
] as const;

type Metric = 'requests' | 'tokens' | 'gpu' | 'cost';
const METRICS: readonly { key: Metric; label: string }[] = [
  { key: 'requests', label: 'Requests' },
  { key: 'tokens', label: 'Tokens' },
  { key: 'gpu', label: 'GPU time' },
  { key: 'cost', label: 'Cost' },
];

/** Every UTC day of [from, to), with zeros for days without traffic. */
function fillDays(summary: UsageSummary, from: string, to: string) {
  const byDay = new Map(summary.byDay.map((d) => [d.day, d]));
  const out: UsageSummary['byDay'] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t < Date.parse(`${to}T00:00:00Z`); t += DAY) {
    const day = isoDay(new Date(t));
    out.push(byDay.get(day) ?? { day, requests: 0, promptTokens: 0, completionTokens: 0, gpuSeconds: 0, costUsd: 0 });
  }
  return out;
}

const compact = (n: number) => (Math.abs(n) >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : Math.abs(n) >= 1e4 ? `${Math.round(n / 1e3)}K` : formatInt(Math.round(n)));

function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv;charset=utf-8' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** One CSV of the range: a row per day and a row per endpoint and mode (a `section` column tells them apart). */
export function usageCsv(s: UsageSummary, days: UsageSummary['byDay']): string {
  const head = ['section', 'day', 'endpoint', 'mode', 'requests', 'prompt_tokens', 'completion_tokens', 'gpu_seconds', 'cost_usd'];
  return toCsv([
    head,
    ...days.map((d) => ['day', d.day, '', '', d.requests, d.promptTokens, d.completionTokens, d.gpuSeconds.toFixed(3), d.costUsd.toFixed(6)]),
    ...s.byEndpoint.map((r) => ['endpoint', '', r.name, r.mode, r.requests, r.promptTokens, r.completionTokens, r.gpuSeconds.toFixed(3), r.costUsd.toFixed(6)]),
    ['total', '', '', '', s.totals.requests, s.totals.promptTokens, s.totals.completionTokens, s.totals.gpuSeconds.toFixed(3), s.totals.costUsd.toFixed(6)],
  ]);
}

function Breakdown({ s, metric }: { s: UsageSummary; metric: Metric }) {
  const value = (r: UsageSummary['byEndpoint'][number]) =>
    metric === 'requests' ? r.requests : metric === 'tokens' ? r.promptTokens + r.completionTokens : metric === 'gpu' ? r.gpuSeconds : r.costUsd;
  const fmt = (n: number) => (metric === 'cost' ? formatUsd(n) : metric === 'gpu' ? formatGpuHours(n) : formatInt(n));
  const rows = [...s.byEndpoint].sort((a, b) => value(b) - value(a));
  const max = Math.max(1e-12, ...rows.map(value));
  return (
    <ul className="breakdown" aria-label={`By endpoint: ${METRICS.find((m) => m.key === metric)?.label}`}>
      {rows.map((r) => (
        <li key={`${r.entryId ?? r.name}-${r.mode}`}>
          <span className="breakdown-name" title={r.name}>
            {r.name} <span className="pill">{r.mode}</span>
          </span>
          <span className="breakdown-bar" aria-hidden="true">
            <span style={{ width: `${(100 * value(r)) / max}%` }} />
          </span>
          <span className="breakdown-value">{fmt(value(r))}</span>
        </li>
      ))}
    </ul>
  );
}

const TOTAL_COLUMNS = ['Requests', 'Prompt tokens', 'Completion tokens', 'GPU time', 'Cost'] as const;

/** The totals columns both tables end with (by endpoint, by day). */
function TotalsHead() {
  return TOTAL_COLUMNS.map((c) => (
    <th key={c} scope="col" className="num">
      {c}
    </th>
  ));
}

/** A row's totals cells, in TOTAL_COLUMNS order; GPU time is the caller's (shared endpoints bill none). */
function TotalsCells({ t, gpuTime }: { t: Pick<UsageSummary['totals'], 'requests' | 'promptTokens' | 'completionTokens' | 'costUsd'>; gpuTime: string }) {
  const values = [formatInt(t.requests), formatInt(t.promptTokens), formatInt(t.completionTokens), gpuTime, formatUsd(t.costUsd)];
  return TOTAL_COLUMNS.map((c, i) => (
    <td key={c} data-label={c} className="num">
      {values[i]}
    </td>
  ));
}

export function UsagePage() {
  const session = useSession();
  const tenantId = session.tenantId as string;
  const today = isoDay(new Date());
  const [from, setFrom] = useState(isoDay(new Date(Date.now() - 13 * DAY)));
  const [to, setTo] = useState(today);
  const [metric, setMetric] = useState<Metric>('tokens');
  // `to` is inclusive in the form; the API takes [from, to).
  const toExclusive = isoDay(new Date(Date.parse(`${to}T00:00:00Z`) + DAY));
  const valid = from <= to;
  const summary = useQuery({
    queryKey: ['usage.summary', tenantId, from, toExclusive],
    queryFn: () => api.usage.summary(tenantId, from, toExclusive),
    enabled: valid,
    placeholderData: keepPreviousData,
    refetchInterval: 15_000,
  });
  const preset = (days: number) => {
    setFrom(isoDay(new Date(Date.now() - (days - 1) * DAY)));
    setTo(today);
  };
  const activePreset = to === today ? PRESETS.find((p) => from === isoDay(new Date(Date.now() - (p.days - 1) * DAY)))?.days : undefined;
  return (
    <section>
      <h1>Usage</h1>
      <p className="muted">
        Requests, tokens, GPU time and cost of your tenant by UTC day and by endpoint. Shared endpoints are billed per token; dedicated deployments per
        GPU-second (their tokens are counted, not billed). Requests count every call forwarded to a runtime, those it refused or failed included (with no tokens
        billed unless it worked on them); calls refused before that (a bad key, a limit, an invalid body) are not counted.
      </p>
      <form className="usage-range" onSubmit={(e) => e.preventDefault()} aria-label="Range">
        <div className="row" role="group" aria-label="Range presets">
          {PRESETS.map((p) => (
            <button
              key={p.days}
              type="button"
              className={activePreset === p.days ? 'chip on' : 'chip'}
              aria-pressed={activePreset === p.days}
              onClick={() => preset(p.days)}
            >
              {p.label}
            </button>
          ))}
        </div>
        <div className="range-dates">
          <div className="field">
            <label htmlFor="usage-from">From</label>
            <input id="usage-from" type="date" value={from} max={to} onChange={(e) => setFrom(e.target.value)} />
          </div>
          <div className="field">
            <label htmlFor="usage-to">To (inclusive)</label>
            <input id="usage-to" type="date" value={to} min={from} onChange={(e) => setTo(e.target.value)} />
          </div>
        </div>
      </form>
      {!valid ? (
        <p className="state error" role="alert">
          The start of the range must not be after its end.
        </p>
      ) : (
        <QueryView query={summary} what="usage">
          {(s) => {
            const days = fillDays(s, from, toExclusive);
            const x = days.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000);
            const dayLabel = (t: number) => new Date(t * 1000).toISOString().slice(0, 10);
            return (
              <>
                <dl className="totals">
                  <div>
                    <dt>Requests</dt>
                    <dd data-testid="total-requests">{formatInt(s.totals.requests)}</dd>
                  </div>
                  <div>
                    <dt>Prompt tokens</dt>
                    <dd>{formatInt(s.totals.promptTokens)}</dd>
                  </div>
                  <div>
                    <dt>Completion tokens</dt>
                    <dd>{formatInt(s.totals.completionTokens)}</dd>
                  </div>
                  <div>
                    <dt>GPU time</dt>
                    <dd data-testid="total-gpu">{formatGpuHours(s.totals.gpuSeconds)}</dd>
                  </div>
                  <div>
                    <dt>Cost</dt>
                    <dd data-testid="total-cost">{formatUsd(s.totals.costUsd)}</dd>
                  </div>
                </dl>
                <div className="row">
                  <button type="button" onClick={() => download(`usage-${from}-to-${to}.csv`, usageCsv(s, days))}>
                    Export CSV
                  </button>
                  <span className="muted small">
                    By day and by endpoint, {from} to {to} (UTC).
                  </span>
                </div>
                {s.totals.requests === 0 && s.totals.gpuSeconds === 0 ? (
                  <Empty>No usage in this range.</Empty>
                ) : (
                  <>
                    <div className="charts">
                      <TimeChart
                        title="Tokens per day"
                        testId="chart-tokens"
                        kind="bars"
                        x={x}
                        xLabel={dayLabel}
                        format={compact}
                        series={[
                          { label: 'Prompt', values: days.map((d) => d.promptTokens), color: '#2453d4' },
                          { label: 'Completion', values: days.map((d) => d.completionTokens), color: '#0e9384' },
                        ]}
                      />
                      <TimeChart
                        title="Requests per day"
                        testId="chart-requests"
                        kind="bars"
                        x={x}
                        xLabel={dayLabel}
                        format={compact}
                        series={[{ label: 'Requests', values: days.map((d) => d.requests), color: '#6941c6' }]}
                      />
                      <TimeChart
                        title="GPU time and cost per day"
                        testId="chart-gpu"
                        kind="bars"
                        x={x}
                        xLabel={dayLabel}
                        format={(n) => `${(n / 3600).toFixed(n >= 36_000 ? 0 : 2)} h`}
                        formatRight={formatUsd}
                        series={[
                          { label: 'GPU-hours', values: days.map((d) => d.gpuSeconds), color: '#dc6803' },
                          { label: 'Cost (all usage)', values: days.map((d) => d.costUsd), color: '#475467', right: true },
                        ]}
                      />
                    </div>
                    <div className="list-heading">
                      <h2>By endpoint</h2>
                      <div className="row" role="group" aria-label="Breakdown metric">
                        {METRICS.map((m) => (
                          <button
                            key={m.key}
                            type="button"
                            className={metric === m.key ? 'chip on' : 'chip'}
                            aria-pressed={metric === m.key}
                            onClick={() => setMetric(m.key)}
                          >
                            {m.label}
                          </button>
                        ))}
                      </div>
                    </div>
                    <Breakdown s={s} metric={metric} />
                    <DataTable
                      className="stack-table"
                      head={
                        <>
                          <th scope="col">Endpoint</th>
                          <th scope="col">Mode</th>
                          <TotalsHead />
                        </>
                      }
                    >
                      {s.byEndpoint.map((r) => (
                        <tr key={`${r.entryId ?? r.name}-${r.mode}`}>
                          <td data-label="Endpoint" className="name-cell">
                            {r.name}
                          </td>
                          <td data-label="Mode">{r.mode}</td>
                          <TotalsCells t={r} gpuTime={r.mode === 'dedicated' ? formatGpuHours(r.gpuSeconds) : '—'} />
                        </tr>
                      ))}
                    </DataTable>
                    <h2>By day</h2>
                    <DataTable
                      className="stack-table"
                      head={
                        <>
                          <th scope="col">Day (UTC)</th>
                          <TotalsHead />
                        </>
                      }
                    >
                      {days
                        .filter((d) => d.requests > 0 || d.gpuSeconds > 0)
                        .map((d) => (
                          <tr key={d.day}>
                            <td data-label="Day (UTC)" className="nowrap">
                              {d.day}
                            </td>
                            <TotalsCells t={d} gpuTime={formatGpuHours(d.gpuSeconds)} />
                          </tr>
                        ))}
                    </DataTable>
                  </>
                )}
              </>
            );
          }}
        </QueryView>
      )}
    </section>
  );
}
