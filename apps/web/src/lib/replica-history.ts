import { useEffect, useState } from 'react';

/** One observation of a deployment's replica counts. */
export interface ReplicaPoint {
  /** Unix seconds. */
  readonly t: number;
  readonly ready: number;
  readonly desired: number;
}

const KEEP_SECONDS = 6 * 3600;
const MAX_POINTS = 4000;
const key = (deploymentId: string) => `infer.replicas.${deploymentId}`;

function load(deploymentId: string): ReplicaPoint[] {
  try {
    const raw: unknown = JSON.parse(sessionStorage.getItem(key(deploymentId)) ?? '[]');
    return Array.isArray(raw) ? (raw as ReplicaPoint[]) : [];
  } catch {
    return [];
  }
}

/**
 * Ready/desired replicas over time, as this browser tab observed them while polling. The control plane
 * keeps no history of desired counts, so the series is built here and kept in sessionStorage (it
 * survives navigation and reloads within the tab, up to six hours).
 */
export function useReplicaHistory(deploymentId: string, current: { ready: number; desired: number } | undefined, observedAt: number): ReplicaPoint[] {
  const [points, setPoints] = useState<ReplicaPoint[]>(() => load(deploymentId));
  useEffect(() => {
    if (!current || observedAt === 0) return;
    setPoints((prev) => {
      const t = Math.floor(observedAt / 1000);
      const last = prev[prev.length - 1];
      if (last && last.t >= t) return prev;
      const next = [...prev.filter((p) => p.t > t - KEEP_SECONDS), { t, ready: current.ready, desired: current.desired }].slice(-MAX_POINTS);
      try {
        sessionStorage.setItem(key(deploymentId), JSON.stringify(next));
      } catch {
        // storage full: the in-memory series still draws
      }
      return next;
    });
  }, [deploymentId, current?.ready, current?.desired, observedAt]);
  return points;
}
