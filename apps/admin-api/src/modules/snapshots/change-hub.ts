import type { ConfigDelta } from '@infer/shared';
import type { Db } from '../../db.ts';
import { outboxSignal } from './outbox.ts';
import { currentVersion, readDeltasAfter } from './snapshots.service.ts';

export type DeltaListener = (deltas: readonly ConfigDelta[]) => void;
/** Whether a cross-process wake-up source is connected now, and how often it re-established itself. */
export interface ExternalWakeState {
  readonly connected: boolean;
  readonly reconnects: number;
}
/** A cross-process wake-up source (Postgres LISTEN). */
export interface ExternalWakeSource {
  /** Starts it (a lost connection is retried inside, never thrown); resolves the stop function. */
  start(wake: () => void): Promise<() => Promise<void>>;
  state(): ExternalWakeState;
}

export interface ChangeHub {
  /** Resolves once the hub knows the current version; subscribers get every later delta, in order. */
  readonly ready: Promise<void>;
  subscribe(listener: DeltaListener): () => void;
  /** Asks the hub to look for new outbox rows now. */
  wake(): void;
  /** The cross-process source's state, or null when there is none (PGlite: one process). */
  externalState(): ExternalWakeState | null;
  close(): Promise<void>;
}

export interface ChangeHubOptions {
  readonly pollMs?: number;
  readonly external?: ExternalWakeSource;
  readonly onError?: (err: unknown) => void;
}

/**
 * Follows the config outbox and fans new rows out to subscribers. Woken in-process after commits,
 * by Postgres NOTIFY from other replicas, and by a short poll as the fallback.
 */
export function createChangeHub(db: Db, opts: ChangeHubOptions = {}): ChangeHub {
  const listeners = new Set<DeltaListener>();
  let lastSeq = 0;
  let running = false;
  let again = false;
  let closed = false;
  let initialised = false;
  let stopExternal: (() => Promise<void>) | undefined;

  const drain = async (): Promise<void> => {
    if (!initialised) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        for (;;) {
          if (closed) return;
          const deltas = await readDeltasAfter(db, lastSeq);
          const last = deltas.at(-1);
          if (!last) break;
          lastSeq = last.version;
          for (const listener of listeners) listener(deltas);
          if (deltas.length < 1000) break;
        }
      } while (again && !closed);
    } catch (err) {
      opts.onError?.(err);
    } finally {
      running = false;
    }
  };
  const wake = (): void => {
    if (!closed) void drain();
  };

  const ready = (async () => {
    lastSeq = await currentVersion(db);
    initialised = true;
    if (opts.external) {
      try {
        stopExternal = await opts.external.start(wake);
      } catch (err) {
        opts.onError?.(err); // the poll still covers us
      }
    }
  })();
  outboxSignal.on('change', wake);
  const timer = setInterval(wake, opts.pollMs ?? 250);
  timer.unref();

  return {
    ready,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    wake,
    externalState: () => opts.external?.state() ?? null,
    async close() {
      closed = true;
      clearInterval(timer);
      outboxSignal.off('change', wake);
      listeners.clear();
      await ready.catch(() => undefined);
      await stopExternal?.();
    },
  };
}
