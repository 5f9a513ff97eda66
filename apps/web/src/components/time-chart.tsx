import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  readonly label: string;
  readonly values: readonly (number | null)[];
  readonly color: string;
  /** Second y axis (right side), for a unit unlike the first series'. */
  readonly right?: boolean;
}

/**
 * A time chart on uPlot: labelled axes, a legend, and a tooltip with every series' value at the cursor.
 * `x` is unix seconds. `bars` draws daily bars; otherwise stepped lines (replica counts change in steps).
 */
export function TimeChart(props: {
  title: string;
  x: readonly number[];
  series: readonly ChartSeries[];
  format: (n: number) => string;
  formatRight?: (n: number) => string;
  kind: 'bars' | 'steps';
  /** How the tooltip names an x value. */
  xLabel: (unixSeconds: number) => string;
  height?: number;
  testId?: string;
  /** Whole-number values (replica counts): integer ticks only. */
  integer?: boolean;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const latest = useRef(props);
  latest.current = props;
  // The chart is rebuilt when its shape changes (series, kind); data alone is swapped in place.
  const shape = `${props.kind}|${props.integer ? 'i' : ''}|${props.series.map((s) => `${s.label}:${s.right ? 'r' : 'l'}`).join(',')}`;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const p = latest.current;
    const tooltip = document.createElement('div');
    tooltip.className = 'chart-tooltip';
    tooltip.hidden = true;
    // Two bar series stand side by side (one ends at the day, the other starts there) instead of hiding each other.
    const grouped = p.series.length > 1;
    const barsFor = (k: number) => uPlot.paths.bars?.({ size: [grouped ? 0.38 : 0.7, grouped ? 24 : 48], align: grouped ? (k === 0 ? -1 : 1) : 0 });
    const steps = uPlot.paths.stepped?.({ align: 1 });
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: p.height ?? 220,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false }, points: { size: 7 } },
      scales: {
        // Few points would otherwise stretch the axis over years: steps show at least five minutes, bars half a day either side.
        // From the data itself: uPlot widens a single point's range to years before calling this.
        x: {
          time: true,
          range: (u, min, max) => {
            const xs = u.data[0];
            const lo = xs.length > 0 ? (xs[0] ?? min) : min;
            const hi = xs.length > 0 ? (xs[xs.length - 1] ?? max) : max;
            if (p.kind === 'bars') return [lo - 43_200, hi + 43_200];
            return hi - lo < 300 ? [hi - 300, hi + 5] : [lo, hi + 5];
          },
        },
        y: { range: (_u, _min, max) => [0, max > 0 ? (p.integer ? Math.max(1, Math.ceil(max * 1.1)) : max * 1.1) : 1] },
        r: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      series: [
        {},
        ...p.series.map((s, k) => ({
          label: s.label,
          stroke: s.color,
          fill: p.kind === 'bars' ? `${s.color}cc` : `${s.color}22`,
          width: p.kind === 'bars' ? 0 : 2,
          scale: s.right ? 'r' : 'y',
          paths: p.kind === 'bars' ? barsFor(k) : steps,
          points: { show: false },
          value: (_u: uPlot, v: number | null) =>
            v == null ? '—' : (s.right ? (latest.current.formatRight ?? latest.current.format) : latest.current.format)(v),
        })),
      ],
      axes: [
        { stroke: '#5b6470', grid: { stroke: '#eef0f3' }, ticks: { stroke: '#d9dde3' }, font: '12px system-ui, sans-serif' },
        {
          stroke: '#5b6470',
          grid: { stroke: '#eef0f3' },
          ticks: { stroke: '#d9dde3' },
          font: '12px system-ui, sans-serif',
          size: 64,
          ...(p.integer ? { incrs: [1, 2, 5, 10, 20, 50, 100] } : {}),
          values: (_u: uPlot, ticks: number[]) => ticks.map((t) => latest.current.format(t)),
        },
        ...(p.series.some((s) => s.right)
          ? [
              {
                scale: 'r',
                side: 1 as const,
                stroke: '#5b6470',
                grid: { show: false },
                font: '12px system-ui, sans-serif',
                size: 64,
                values: (_u: uPlot, ticks: number[]) => ticks.map((t) => (latest.current.formatRight ?? latest.current.format)(t)),
              },
            ]
          : []),
      ],
      hooks: {
        init: [
          (u) => {
            u.over.append(tooltip);
          },
        ],
        setCursor: [
          (u) => {
            const i = u.cursor.idx;
            const cur = latest.current;
            const xv = i == null ? undefined : u.data[0][i];
            if (i == null || xv == null || u.cursor.left == null || u.cursor.left < 0) {
              tooltip.hidden = true;
              return;
            }
            tooltip.replaceChildren();
            const head = document.createElement('strong');
            head.textContent = cur.xLabel(xv);
            tooltip.append(head);
            cur.series.forEach((s, k) => {
              const v = u.data[k + 1]?.[i];
              const line = document.createElement('div');
              const swatch = document.createElement('span');
              swatch.className = 'swatch';
              swatch.style.background = s.color;
              line.append(swatch, `${s.label}: ${v == null ? '—' : (s.right ? (cur.formatRight ?? cur.format) : cur.format)(v)}`);
              tooltip.append(line);
            });
            tooltip.hidden = false;
            const w = u.over.clientWidth;
            const left = u.cursor.left;
            tooltip.style.left = left > w / 2 ? '' : `${left + 12}px`;
            tooltip.style.right = left > w / 2 ? `${w - left + 12}px` : '';
            tooltip.style.top = '4px';
          },
        ],
      },
    };
    const u = new uPlot(opts, toData(p), el);
    plot.current = u;
    const ro = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (Math.abs(w - u.width) > 1) u.setSize({ width: w, height: latest.current.height ?? 220 });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [shape]);

  useEffect(() => {
    plot.current?.setData(toData(props));
  });

  const summary = props.series.map((s) => `${s.label}: peak ${props.format(Math.max(0, ...s.values.map((v) => v ?? 0)))}`).join('; ');
  return (
    <figure className="chart-figure" data-testid={props.testId}>
      <figcaption>{props.title}</figcaption>
      <div ref={box} className="uplot-box" role="img" aria-label={`${props.title}. ${summary}`} />
    </figure>
  );
}

function toData(p: { x: readonly number[]; series: readonly ChartSeries[] }): uPlot.AlignedData {
  return [Float64Array.from(p.x), ...p.series.map((s) => s.values.map((v) => v ?? null))] as unknown as uPlot.AlignedData;
}
