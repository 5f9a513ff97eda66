/** A plain SVG bar chart; the data is also in a table beside it, so the chart is decorative for screen readers. */
export function BarChart(props: { title: string; data: readonly { label: string; value: number }[]; format: (n: number) => string }) {
  const W = 600;
  const H = 180;
  const pad = { l: 8, r: 8, t: 16, b: 22 };
  const max = Math.max(1e-9, ...props.data.map((d) => d.value));
  const n = Math.max(1, props.data.length);
  const bw = (W - pad.l - pad.r) / n;
  const every = Math.ceil(n / 8);
  return (
    <figure className="chart-figure">
      <figcaption>{props.title}</figcaption>
      <svg className="chart" viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${props.title}: peak ${props.format(max)}`}>
        <line className="axis" x1={pad.l} x2={W - pad.r} y1={H - pad.b} y2={H - pad.b} />
        {props.data.map((d, i) => {
          const h = ((H - pad.t - pad.b) * d.value) / max;
          const x = pad.l + i * bw;
          return (
            <g key={d.label}>
              <rect className="bar" x={x + bw * 0.1} width={Math.max(1, bw * 0.8)} y={H - pad.b - h} height={h}>
                <title>{`${d.label}: ${props.format(d.value)}`}</title>
              </rect>
              {i % every === 0 && (
                <text x={x + bw / 2} y={H - 6} textAnchor="middle">{d.label.slice(5)}</text>
              )}
            </g>
          );
        })}
        <text x={pad.l} y={11}>{props.format(max)}</text>
      </svg>
    </figure>
  );
}
