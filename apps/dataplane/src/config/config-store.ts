import { applyDeltas as applyConfigDeltas } from '@infer/shared';
import type { ConfigDelta, ConfigSnapshot } from '@infer/shared';
import { buildConfigView } from './config-view.ts';
import type { ConfigView } from './config-view.ts';

export type VersionListener = (version: number, view: ConfigView) => void;

/** Holds the current config view; every change swaps one reference. */
export interface ConfigStore {
  /** The current indexed view, or null before the first snapshot. */
  readonly view: ConfigView | null;
  /** The current config version, or null before the first snapshot. */
  readonly version: number | null;
  /** The raw snapshot behind the view (for persistence). */
  snapshot(): ConfigSnapshot | null;
  /** Replaces the whole state with a snapshot. */
  replace(snapshot: ConfigSnapshot): void;
  /** Applies deltas in order to the current snapshot; ignored before the first snapshot. */
  applyDeltas(deltas: readonly ConfigDelta[]): void;
  /** Calls `listener` after every swap; returns an unsubscribe function. */
  onVersion(listener: VersionListener): () => void;
  /**
   * Why the node must not serve on this config (the control plane refused its credential, so keys revoked since are
   * unknown here), or null. While set, /readyz and inference requests answer 503.
   */
  readonly refusal: string | null;
  /** Sets the refusal, or clears it (null) once the control plane accepts the node again. */
  setRefusal(reason: string | null): void;
}

/** Creates a config store, optionally seeded with a snapshot. */
export function createConfigStore(initial?: ConfigSnapshot): ConfigStore {
  let current: ConfigSnapshot | null = null;
  let view: ConfigView | null = null;
  let refusal: string | null = null;
  const listeners = new Set<VersionListener>();

  const swap = (next: ConfigSnapshot): void => {
    const nextView = buildConfigView(next);
    current = next;
    view = nextView;
    for (const l of listeners) l(nextView.version, nextView);
  };
  if (initial) swap(initial);

  return {
    get view() {
      return view;
    },
    get version() {
      return view?.version ?? null;
    },
    snapshot: () => current,
    replace: swap,
    applyDeltas(deltas) {
      if (current === null || deltas.length === 0) return;
      const next = applyConfigDeltas(current, deltas);
      if (next.version !== current.version) swap(next);
    },
    onVersion(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get refusal() {
      return refusal;
    },
    setRefusal(reason) {
      refusal = reason;
    },
  };
}
