import { escapeLabel, labelKeyJoiner } from '../metrics.ts';
import type { RoutingPolicyName } from './routing-settings.ts';

/** Why the router used the policy it used. */
export type DecisionReason = 'scored' | 'policy' | 'single' | 'stale_metrics' | 'all_ejected';

/**
 * Routing's Prometheus families: decisions and scores by target id and replica id (never an address), sheds and
 * holds, and requests that had to wait for a pooled connection. Label values come from the snapshot's ids.
 */
export interface RoutingMetrics {
  decision(target: string, replica: string, policy: RoutingPolicyName, reason: DecisionReason): void;
  score(target: string, replica: string, score: number, prefixMatch: number): void;
  held(target: string): void;
  shed(target: string): void;
  /** A request was dispatched to a replica whose connections were all busy (it queued for one). */
  connectionWait(replica: string): void;
  /** Forgets the series of replicas no longer in the snapshot (scale-to-zero churn would grow them without bound). */
  retain(replicas: ReadonlySet<string>): void;
  render(lines: string[]): void;
}

const SEP = '\u0000';

export function createRoutingMetrics(): RoutingMetrics {
  const decisions = new Map<string, number>();
  const scores = new Map<string, { score: number; prefix: number }>();
  const held = new Map<string, number>();
  const shed = new Map<string, number>();
  const connectionWaits = new Map<string, number>();
  const bump = (m: Map<string, number>, k: string): void => {
    m.set(k, (m.get(k) ?? 0) + 1);
  };
  const decisionKey = labelKeyJoiner();
  return {
    decision(target, replica, policy, reason) {
      bump(decisions, decisionKey(target, replica, policy, reason));
    },
    score(target, replica, score, prefix) {
      scores.set(`${target}${SEP}${replica}`, { score, prefix });
    },
    held: (t) => bump(held, t),
    shed: (t) => bump(shed, t),
    connectionWait: (r) => bump(connectionWaits, r),
    retain(replicas) {
      for (const k of scores.keys()) if (!replicas.has(k.split(SEP)[1]!)) scores.delete(k);
      for (const k of decisions.keys()) if (!replicas.has(k.split(SEP)[1]!)) decisions.delete(k);
      for (const r of connectionWaits.keys()) if (!replicas.has(r)) connectionWaits.delete(r);
    },
    render(lines) {
      const family = (name: string, type: string, help: string): void => {
        lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      };
      family(
        'dataplane_routing_decisions_total',
        'counter',
        'Replica picks, by target, replica, the policy applied and why (scored, stale_metrics fallback, ...).',
      );
      for (const [k, n] of decisions) {
        const [t = '', r = '', p = '', why = ''] = k.split(SEP);
        lines.push(`dataplane_routing_decisions_total{target="${escapeLabel(t)}",replica="${escapeLabel(r)}",policy="${p}",reason="${why}"} ${n}`);
      }
      family('dataplane_routing_score', 'gauge', "The scorer's last score of a replica for a target (higher wins).");
      for (const [k, v] of scores) {
        const [t = '', r = ''] = k.split(SEP);
        lines.push(`dataplane_routing_score{target="${escapeLabel(t)}",replica="${escapeLabel(r)}"} ${v.score}`);
      }
      family('dataplane_routing_prefix_match_ratio', 'gauge', 'Share of the last scored prompt a replica was believed to hold cached.');
      for (const [k, v] of scores) {
        const [t = '', r = ''] = k.split(SEP);
        lines.push(`dataplane_routing_prefix_match_ratio{target="${escapeLabel(t)}",replica="${escapeLabel(r)}"} ${v.prefix}`);
      }
      family('dataplane_routing_held_total', 'counter', 'Requests held because every replica of the target was saturated.');
      for (const [t, n] of held) lines.push(`dataplane_routing_held_total{target="${escapeLabel(t)}"} ${n}`);
      family('dataplane_routing_shed_total', 'counter', 'Requests shed with 429 because every replica of the target stayed saturated.');
      for (const [t, n] of shed) lines.push(`dataplane_routing_shed_total{target="${escapeLabel(t)}"} ${n}`);
      family('dataplane_upstream_connection_waits_total', 'counter', 'Requests that had to wait for a pooled connection to their replica.');
      for (const [r, n] of connectionWaits) lines.push(`dataplane_upstream_connection_waits_total{replica="${escapeLabel(r)}"} ${n}`);
    },
  };
}
