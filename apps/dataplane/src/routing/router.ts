import type { ClientResponse } from '../front/client-response.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { ResolvedUpstream, RouteTarget } from '../config/config-view.ts';
import type { UpstreamPools } from '../upstream/upstream-pools.ts';
import type { PrefixIndex } from './prefix-index.ts';
import { promptBlocks, targetSeed } from './prompt-blocks.ts';
import type { ReplicaLoad, ReplicaScraper } from './replica-scraper.ts';
import type { DecisionReason, RoutingMetrics } from './routing-metrics.ts';
import { mergeRouting, type RoutingPolicyName, type RoutingSettings } from './routing-settings.ts';
import { scoreReplicas } from './scorer.ts';

export interface RouterOptions {
  readonly pools: UpstreamPools;
  readonly scraper: ReplicaScraper;
  readonly index: PrefixIndex;
  readonly metrics: RoutingMetrics;
  /** The node's settings (ROUTING_POLICY and the default weights); targets override them. */
  readonly defaults: RoutingSettings;
  /** Metrics older than this are stale: the target falls back to least-in-flight, ms. */
  readonly staleMs: number;
  /** How long a request waits for a replica to leave saturation before it is shed, ms (0: shed at once). */
  readonly holdMs: number;
}

/** A picked replica, and the uncached prompt blocks it is expected to prefill (the scorer's estimate; else 0). */
export interface RoutePick {
  readonly upstream: ResolvedUpstream;
  readonly prefillBlocks: number;
}

/** How a hold ended: a replica has room, every one stayed saturated, or the client left. */
export type HoldOutcome = 'go' | 'shed' | 'gone';

export interface Router {
  /**
   * Picks a replica of `target` (skipping origins in `skip`, and full ones: `cap` requests of this node in flight
   * there) by the target's policy, never an ejected one unless every remaining one with room is ejected; null when
   * none is left (all tried, or every one left is full). Counts the decision and logs it at debug level, on `log` (the
   * node's logger) with the request's `reqId`.
   */
  pick(
    target: RouteTarget,
    skip: ReadonlySet<string> | null,
    body: Record<string, unknown>,
    log: FastifyBaseLogger,
    reqId: string,
    cap?: number,
  ): RoutePick | null;
  /** Null when the target may be sent to now; else a wait that ends when a replica has room, or in a shed. */
  hold(target: RouteTarget, res: ClientResponse): Promise<HoldOutcome> | null;
}

const HOLD_POLL_MS = 25;
const debugOn = (log: FastifyBaseLogger): boolean => log.level === 'debug' || log.level === 'trace';

export const targetIdOf = (t: RouteTarget): string => t.deploymentId ?? t.endpointId;

/** The scorer, least-in-flight, round robin or random over a target's healthy replicas (see routing/README.md). */
export function createRouter(o: RouterOptions): Router {
  const { pools, scraper, index, metrics } = o;
  const rr = new Map<string, number>();
  const settingsCache = new WeakMap<RouteTarget, RoutingSettings>();
  const settingsOf = (t: RouteTarget): RoutingSettings => {
    let s = settingsCache.get(t);
    if (s === undefined) {
      s = mergeRouting(o.defaults, t.routing);
      settingsCache.set(t, s);
    }
    return s;
  };
  const fresh = (l: ReplicaLoad | null, now: number): l is ReplicaLoad => l !== null && now - l.at <= o.staleMs;
  const saturated = (l: ReplicaLoad, s: RoutingSettings): boolean => l.waiting >= s.queueThreshold || (l.kvUsage !== null && l.kvUsage >= s.kvThreshold);

  const decide = (
    t: RouteTarget,
    u: ResolvedUpstream,
    policy: RoutingPolicyName,
    reason: DecisionReason,
    log: FastifyBaseLogger,
    reqId: string,
    extra?: object,
    prefillBlocks = 0,
  ): RoutePick => {
    const id = targetIdOf(t);
    metrics.decision(id, u.id, policy, reason);
    if (debugOn(log)) log.debug({ reqId, target: id, replica: u.id, policy, reason, ...extra }, 'routing decision');
    return { upstream: u, prefillBlocks };
  };

  return {
    pick(target, skip, body, log, reqId, cap = Number.POSITIVE_INFINITY) {
      const s = settingsOf(target);
      const all = target.upstreams;
      if (all.length === 1) {
        // One replica (the common case): nothing to choose, nothing to learn; no hashing on this path.
        const only = all[0]!;
        return (skip !== null && skip.has(only.origin)) || pools.full(only, cap) ? null : decide(target, only, s.policy, 'single', log, reqId);
      }
      // A full replica is no candidate for any policy: the request waits for a slot instead (forward-chat.ts).
      let excluded = false;
      for (const u of all) {
        if ((skip !== null && skip.has(u.origin)) || pools.full(u, cap)) {
          excluded = true;
          break;
        }
      }
      const candidates = excluded ? all.filter((u) => (skip === null || !skip.has(u.origin)) && !pools.full(u, cap)) : all;
      if (candidates.length === 0) return null;
      const healthy = candidates.filter((u) => !pools.get(u.origin).ejected);
      if (healthy.length === 0) {
        // Every remaining replica is ejected: try the least loaded of them anyway (as before routing policies).
        const u = pools.pick(candidates, null);
        return u === null ? null : decide(target, u, 'least_in_flight', 'all_ejected', log, reqId);
      }
      if (healthy.length === 1) {
        const only = healthy[0]!;
        if (s.policy === 'scorer') index.record(promptBlocks(body, targetSeed(targetIdOf(target))), only.id);
        return decide(target, only, s.policy, 'single', log, reqId);
      }
      switch (s.policy) {
        case 'random':
          return decide(target, healthy[Math.floor(Math.random() * healthy.length)]!, 'random', 'policy', log, reqId);
        case 'round_robin': {
          const id = targetIdOf(target);
          const n = rr.get(id) ?? 0;
          rr.set(id, n + 1);
          return decide(target, healthy[n % healthy.length]!, 'round_robin', 'policy', log, reqId);
        }
        case 'least_in_flight':
          return decide(target, pools.pick(healthy, null)!, 'least_in_flight', 'policy', log, reqId);
        default:
          break;
      }
      // Scorer. The runtime caches what it was sent whichever way it was picked, so every pick is recorded.
      const id = targetIdOf(target);
      const blocks = promptBlocks(body, targetSeed(id));
      const now = performance.now();
      const loads = healthy.map((u) => scraper.load(u.origin));
      if (!loads.every((l) => fresh(l, now))) {
        const u = pools.pick(healthy, null)!;
        index.record(blocks, u.id);
        return decide(target, u, 'least_in_flight', 'stale_metrics', log, reqId);
      }
      const matched = index.match(
        blocks,
        healthy.map((u) => u.id),
      );
      const scored = scoreReplicas(
        healthy.map((u, i) => {
          const state = pools.get(u.origin);
          return {
            id: u.id,
            inFlight: state.inFlight,
            pendingPrefillBlocks: state.pendingPrefillBlocks,
            load: loads[i]!,
            prefixMatch: blocks.length === 0 ? 0 : (matched.get(u.id) ?? 0) / blocks.length,
          };
        }),
        blocks.length,
        s,
      );
      let best = 0;
      for (let i = 1; i < scored.length; i++) {
        const a = scored[i]!;
        const b = scored[best]!;
        if (a.score > b.score || (a.score === b.score && a.inFlight < b.inFlight)) best = i;
      }
      // Equal scores and loads (an idle target, a new prompt): rotate, so ties do not all land on the first.
      const top = scored.filter((x) => x.score === scored[best]!.score && x.inFlight === scored[best]!.inFlight);
      if (top.length > 1) {
        const n = rr.get(id) ?? 0;
        rr.set(id, n + 1);
        best = scored.indexOf(top[n % top.length]!);
      }
      for (const x of scored) metrics.score(id, x.id, x.score, x.prefixMatch);
      const chosen = healthy[best]!;
      index.record(blocks, chosen.id);
      return decide(
        target,
        chosen,
        'scorer',
        'scored',
        log,
        reqId,
        debugOn(log) ? { scores: scored.map((x) => ({ replica: x.id, score: x.score, prefix: x.prefixMatch, queue: x.queue, kv: x.kv })) } : undefined,
        blocks.length - (matched.get(chosen.id) ?? 0),
      );
    },
    hold(target, res) {
      const s = settingsOf(target);
      if (s.policy !== 'scorer') return null;
      const allSaturated = (): boolean => {
        const now = performance.now();
        let any = false;
        for (const u of target.upstreams) {
          if (pools.get(u.origin).ejected) continue;
          const l = scraper.load(u.origin);
          // Unknown load is not saturation: such a replica may take the request.
          if (!fresh(l, now) || !saturated(l, s)) return false;
          any = true;
        }
        return any;
      };
      if (!allSaturated()) return null;
      const id = targetIdOf(target);
      if (o.holdMs <= 0) {
        metrics.shed(id);
        return Promise.resolve('shed');
      }
      metrics.held(id);
      return new Promise<HoldOutcome>((resolve) => {
        const deadline = performance.now() + o.holdMs;
        const onClose = (): void => finish('gone');
        const finish = (outcome: HoldOutcome): void => {
          clearInterval(timer);
          res.off('close', onClose);
          if (outcome === 'shed') metrics.shed(id);
          resolve(outcome);
        };
        const timer = setInterval(() => {
          if (!allSaturated()) finish('go');
          else if (performance.now() >= deadline) finish('shed');
        }, HOLD_POLL_MS);
        res.once('close', onClose);
      });
    },
  };
}
