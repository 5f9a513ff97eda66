import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type UsageSummary } from '../api.tsx';
import { BarChart } from '../components/bar-chart.tsx';
import { Empty, QueryView } from '../components/states.tsx';
import { formatInt, formatUsd, isoDay } from '../lib/format.ts';
import { useSession } from '../session.tsx';

const DAY = 86_400_000;

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

export function UsagePage() {
  const session = useSession();
  const tenantId = session.tenantId as string;
  const today = isoDay(new Date());
  const [from, setFrom] = useState(isoDay(new Date(Date.now() - 13 * DAY)));
  const [to, setTo] = useState(today);
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
  return (
    <section>
      <h1>Usage</h1>
      <p className="muted">Requests, tokens and cost of your tenant by UTC day and by endpoint. Shared mode is billed per token.</p>
      <form className="form inline" onSubmit={(e) => e.preventDefault()} aria-label="Range">
        <div className="field">
          <label htmlFor="usage-from">From</label>
          <input id="usage-from" type="date" value={from} max={to} onChange={(e) => setFrom(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="usage-to">To (inclusive)</label>
          <input id="usage-to" type="date" value={to} min={from} onChange={(e) => setTo(e.target.value)} />
        </div>
        <div className="row">
          <button type="button" onClick={() => preset(1)}>Today</button>
          <button type="button" onClick={() => preset(7)}>7 days</button>
          <button type="button" onClick={() => preset(30)}>30 days</button>
        </div>
      </form>
      {!valid ? (
        <p className="state error" role="alert">The start of the range must not be after its end.</p>
      ) : (
        <QueryView query={summary} what="usage">
          {(s) => {
            const days = fillDays(s, from, toExclusive);
            return (
              <>
                <dl className="totals">
                  <div><dt>Requests</dt><dd data-testid="total-requests">{formatInt(s.totals.requests)}</dd></div>
                  <div><dt>Prompt tokens</dt><dd>{formatInt(s.totals.promptTokens)}</dd></div>
                  <div><dt>Completion tokens</dt><dd>{formatInt(s.totals.completionTokens)}</dd></div>
                  <div><dt>Cost</dt><dd>{formatUsd(s.totals.costUsd)}</dd></div>
                </dl>
                {s.totals.requests === 0 ? (
                  <Empty>No requests in this range.</Empty>
                ) : (
                  <>
                    <div className="charts">
                      <BarChart title="Requests per day" data={days.map((d) => ({ label: d.day, value: d.requests }))} format={formatInt} />
                      <BarChart title="Tokens per day" data={days.map((d) => ({ label: d.day, value: d.promptTokens + d.completionTokens }))} format={formatInt} />
                      <BarChart title="Cost per day" data={days.map((d) => ({ label: d.day, value: d.costUsd }))} format={formatUsd} />
                    </div>
                    <h2>By endpoint</h2>
                    <div className="table-wrap">
                      <table>
                        <thead>
                          <tr>
                            <th scope="col">Endpoint</th><th scope="col">Mode</th><th scope="col" className="num">Requests</th>
                            <th scope="col" className="num">Prompt tokens</th><th scope="col" className="num">Completion tokens</th><th scope="col" className="num">Cost</th>
                          </tr>
                        </thead>
                        <tbody>
                          {s.byEndpoint.map((r) => (
                            <tr key={`${r.entryId ?? r.name}-${r.mode}`}>
                              <td>{r.name}</td><td>{r.mode}</td><td className="num">{formatInt(r.requests)}</td>
                              <td className="num">{formatInt(r.promptTokens)}</td><td className="num">{formatInt(r.completionTokens)}</td>
                              <td className="num">{formatUsd(r.costUsd)}</td>
                            </tr>
                          ))}
                        </tbody>
                      </table>
                    </div>
                    <h2>By day</h2>
                    <div className="table-wrap">
                      <table>
                        <thead>
                          <tr>
                            <th scope="col">Day (UTC)</th><th scope="col" className="num">Requests</th><th scope="col" className="num">Prompt tokens</th>
                            <th scope="col" className="num">Completion tokens</th><th scope="col" className="num">Cost</th>
                          </tr>
                        </thead>
                        <tbody>
                          {days.filter((d) => d.requests > 0).map((d) => (
                            <tr key={d.day}>
                              <td>{d.day}</td><td className="num">{formatInt(d.requests)}</td><td className="num">{formatInt(d.promptTokens)}</td>
                              <td className="num">{formatInt(d.completionTokens)}</td><td className="num">{formatUsd(d.costUsd)}</td>
                            </tr>
                          ))}
                        </tbody>
                      </table>
                    </div>
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
