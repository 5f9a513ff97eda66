import type { ConfigStore } from '../config/config-store.ts';
import type { ConfigView, ResolvedUpstream } from '../config/config-view.ts';
import { escapeLabel, type DataplaneMetrics } from '../metrics.ts';
import type { UpstreamPools } from '../upstream/upstream-pools.ts';
import { createPrefixIndex } from './prefix-index.ts';
import { createReplicaScraper } from './replica-scraper.ts';
import { createRouter, type Router } from './router.ts';
import { createRoutingMetrics, type RoutingMetrics } from './routing-metrics.ts';
import { defaultRoutingSettings, type RoutingPolicyName } from './routing-settings.ts';

export interface RoutingOptions {
  /** The node's default policy (ROUTING_POLICY; default scorer); catalog entries and deployments override it. */
  readonly policy?: RoutingPolicyName;
  /** Between scrapes of one replica's /metrics, ms (default 250). */
  readonly scrapeIntervalMs?: number;
  /** A scrape slower than this fails, ms (default 1000). */
  readonly scrapeTimeoutMs?: number;
  /** Scrapes at once (default 8). */
  readonly scrapeConcurrency?: number;
  /** Metrics older than this are stale: least in flight is used instead, ms (default 2000). */
  readonly staleMs?: number;
  /** Longest wait for a saturated target to have room before a 429, ms (default 1000; 0: shed at once). */
  readonly holdMs?: number;
  /** Prompt blocks the prefix index remembers, across targets (default 65536: a few MiB). */
  readonly prefixIndexBlocks?: number;
}

export interface Routing {
  readonly router: Router;
  readonly metrics: RoutingMetrics;
  close(): void;
}

function* upstreamsOf(view: ConfigView): Generator<ResolvedUpstream> {
  for (const t of view.endpointByName.values()) yield* t.upstreams;
  for (const t of view.deploymentByTenantAndName.values()) yield* t.upstreams;
}

/** The router with its scraper, prefix index and metrics, following the config store's snapshots. */
export function createRouting(o: RoutingOptions, pools: UpstreamPools, store: ConfigStore, nodeMetrics: DataplaneMetrics): Routing {
  const metrics = createRoutingMetrics();
  const scraper = createReplicaScraper({
    pools,
    intervalMs: o.scrapeIntervalMs ?? 250,
    timeoutMs: o.scrapeTimeoutMs ?? 1000,
    concurrency: o.scrapeConcurrency ?? 8,
  });
  const router = createRouter({
    pools,
    scraper,
    index: createPrefixIndex(o.prefixIndexBlocks ?? 65_536),
    metrics,
    defaults: { ...defaultRoutingSettings, policy: o.policy ?? defaultRoutingSettings.policy },
    staleMs: o.staleMs ?? 2000,
    holdMs: o.holdMs ?? 1000,
  });
  const follow = (view: ConfigView): void => {
    const ups = [...upstreamsOf(view)];
    scraper.setReplicas(ups);
    const ids = new Set(ups.map((u) => u.id));
    metrics.retain(ids);
    nodeMetrics.retainReplicas(ids);
  };
  if (store.view !== null) follow(store.view);
  const unsubscribe = store.onVersion((_v, view) => follow(view));

  nodeMetrics.section((lines) => {
    metrics.render(lines);
    const now = performance.now();
    lines.push(
      '# HELP dataplane_replica_metrics_age_seconds Age of the last successful /metrics scrape of a replica (-1: none yet).',
      '# TYPE dataplane_replica_metrics_age_seconds gauge',
    );
    const rows: [string, string][] = [];
    for (const [, e] of scraper.entries()) {
      rows.push([e.replicaId, e.load === null ? '-1' : String((now - e.load.at) / 1000)]);
    }
    for (const [id, age] of rows) lines.push(`dataplane_replica_metrics_age_seconds{replica="${escapeLabel(id)}"} ${age}`);
    lines.push('# HELP dataplane_replica_queue_depth Requests waiting on a replica at its last scrape.', '# TYPE dataplane_replica_queue_depth gauge');
    for (const [, e] of scraper.entries())
      if (e.load !== null) lines.push(`dataplane_replica_queue_depth{replica="${escapeLabel(e.replicaId)}"} ${e.load.waiting}`);
    lines.push('# HELP dataplane_replica_kv_cache_usage KV-cache use (0..1) of a replica at its last scrape.', '# TYPE dataplane_replica_kv_cache_usage gauge');
    for (const [, e] of scraper.entries())
      if (e.load?.kvUsage != null) lines.push(`dataplane_replica_kv_cache_usage{replica="${escapeLabel(e.replicaId)}"} ${e.load.kvUsage}`);
    lines.push('# HELP dataplane_replica_scrape_failures Consecutive failed /metrics scrapes of a replica.', '# TYPE dataplane_replica_scrape_failures gauge');
    for (const [, e] of scraper.entries()) lines.push(`dataplane_replica_scrape_failures{replica="${escapeLabel(e.replicaId)}"} ${e.failures}`);
    // Requests queued in a replica's pool for a socket: zero while the pool is sized from the admitted concurrency.
    lines.push(
      '# HELP dataplane_upstream_waiting_for_connection Requests waiting for a pooled connection to a replica now.',
      '# TYPE dataplane_upstream_waiting_for_connection gauge',
    );
    const ids = new Map<string, string>();
    if (store.view !== null) for (const u of upstreamsOf(store.view)) if (!ids.has(u.origin)) ids.set(u.origin, u.id);
    for (const s of pools.states()) {
      const id = ids.get(s.origin);
      if (id !== undefined) lines.push(`dataplane_upstream_waiting_for_connection{replica="${escapeLabel(id)}"} ${s.chat.stats.pending}`);
    }
  });
  return {
    router,
    metrics,
    close() {
      unsubscribe();
      scraper.close();
    },
  };
}
