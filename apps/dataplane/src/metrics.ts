import type { ConfigStore } from './config/config-store.ts';

/** Counters for `/metrics`; counting is one Map lookup. */
export interface DataplaneMetrics {
  countRequest(route: string, mode: string, status: number): void;
  render(): string;
}

const escapeLabel = (v: string): string => v.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));

/** Minimal Prometheus text exposition: requests by route/mode/status and the config version. */
export function createMetrics(store: ConfigStore): DataplaneMetrics {
  const requests = new Map<string, number>();
  return {
    countRequest(route, mode, status) {
      const key = `${route}\u0000${mode}\u0000${status}`;
      requests.set(key, (requests.get(key) ?? 0) + 1);
    },
    render() {
      const lines = [
        '# HELP dataplane_requests_total Requests answered, by route, mode and HTTP status.',
        '# TYPE dataplane_requests_total counter',
      ];
      for (const [key, n] of requests) {
        const [route = '', mode = '', status = ''] = key.split('\u0000');
        lines.push(`dataplane_requests_total{route="${escapeLabel(route)}",mode="${escapeLabel(mode)}",status="${status}"} ${n}`);
      }
      lines.push(
        '# HELP dataplane_config_version Version of the config snapshot in use (-1 before the first).',
        '# TYPE dataplane_config_version gauge',
        `dataplane_config_version ${store.version ?? -1}`,
      );
      return `${lines.join('\n')}\n`;
    },
  };
}
