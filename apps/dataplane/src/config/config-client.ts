import { trimTrailingSlashes } from '@infer/shared';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { applyDeltas, configDeltaSchema, configSnapshotSchema } from '@infer/shared';
import type { ConfigSnapshot } from '@infer/shared';
import { request } from 'undici';
import type { ConfigStore, VersionListener } from './config-store.ts';
import { createSseParser } from './sse-parser.ts';
import { readSnapshotFile, snapshotFileKey, writeSnapshotFile } from './snapshot-file.ts';

export interface ConfigClientOptions {
  /** Control-plane base URL. */
  readonly url: string;
  readonly nodeToken: string;
  readonly store: ConfigStore;
  /** Where the last good snapshot is persisted and loaded from at start. */
  readonly snapshotFile?: string;
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Reconnect when the stream is silent this long (the server pings more often). */
  readonly idleTimeoutMs?: number;
  /** Connection and payload problems (the client keeps going). */
  readonly onError?: (err: unknown) => void;
  /**
   * The control plane refused the node's credential (401/403): the store's refusal is set, so the node fails closed
   * until a stream is accepted again. Called once per refusal, not per attempt (the attempts go on, at most backoff).
   */
  readonly onRefused?: (status: number) => void;
  /** A stream was accepted again after a refusal (the refusal is cleared). */
  readonly onAccepted?: () => void;
}

export interface ConfigClient {
  /** Loads the snapshot file (if any) and keeps a stream to the control plane until close(). */
  start(): void;
  close(): Promise<void>;
  /** True while the stream is open. */
  readonly connected: boolean;
  readonly version: number | null;
  onVersion(listener: VersionListener): () => void;
}

/** The control plane answered that it does not know, or no longer accepts, the node's credential. */
class CredentialRefused extends Error {
  readonly status: number;
  constructor(status: number) {
    super(`the control plane refused this node's credential (HTTP ${status})`);
    this.status = status;
  }
}

/** Follows the control plane's config stream (snapshot, then deltas) and swaps the store's view. */
export function createConfigClient(opts: ConfigClientOptions): ConfigClient {
  const { store } = opts;
  const streamUrl = `${trimTrailingSlashes(opts.url)}/internal/v1/config/stream`;
  const authorization = `Bearer ${opts.nodeToken}`;
  // Upstream API keys in the snapshot file are sealed with a key derived from this node's credential.
  const fileKey = snapshotFileKey(opts.nodeToken);
  const minBackoff = opts.minBackoffMs ?? 200;
  const maxBackoff = opts.maxBackoffMs ?? 2000;
  const stop = new AbortController();
  let connected = false;
  let running: Promise<void> | null = null;
  let writing: Promise<void> | null = null;
  let writeAgain = false;

  const persist = (): void => {
    const file = opts.snapshotFile;
    if (file === undefined) return;
    if (writing !== null) {
      writeAgain = true;
      return;
    }
    writing = (async () => {
      do {
        writeAgain = false;
        const snap = store.snapshot();
        if (snap !== null) await writeSnapshotFile(file, snap, fileKey).catch((err: unknown) => opts.onError?.(err));
      } while (writeAgain);
      writing = null;
    })();
  };

  /** One connection; resolves when the server ends it, rejects on errors. Returns true if any event arrived. */
  const follow = async (): Promise<boolean> => {
    const headers: Record<string, string> = { accept: 'text/event-stream', authorization };
    const version = store.version;
    // After a refusal, a whole snapshot (not the deltas since): it comes at once, and the refusal lifts only once it is in.
    const refused = store.refusal !== null;
    if (version !== null && !refused) headers['last-event-id'] = String(version);
    const res = await request(streamUrl, { method: 'GET', headers, signal: stop.signal, headersTimeout: 10_000, bodyTimeout: opts.idleTimeoutMs ?? 45_000 });
    if (res.statusCode !== 200) {
      await res.body.dump();
      // A revoked credential: keys revoked from now on would never reach this node, so it must stop serving.
      if (res.statusCode === 401 || res.statusCode === 403) throw new CredentialRefused(res.statusCode);
      throw new Error(`config stream answered HTTP ${res.statusCode}`);
    }
    connected = true;
    let received = false;
    try {
      const parser = createSseParser();
      res.body.setEncoding('utf8');
      for await (const chunk of res.body) {
        let next: ConfigSnapshot | null = store.snapshot();
        let changed = false;
        for (const ev of parser.push(chunk as string)) {
          received = true;
          if (ev.event === 'snapshot') {
            next = configSnapshotSchema.parse(JSON.parse(ev.data));
            changed = true;
          } else if (ev.event === 'delta' && next !== null) {
            const delta = configDeltaSchema.parse(JSON.parse(ev.data));
            const applied = applyDeltas(next, [delta]);
            changed ||= applied.version !== next.version;
            next = applied;
          }
        }
        // Apply a whole chunk's events in one swap.
        if (changed && next !== null) {
          store.replace(next);
          persist();
        }
        // Accepted again, and what changed meanwhile (revoked keys included) is in: serve, and save the snapshot again.
        if (refused && changed && store.refusal !== null) {
          store.setRefusal(null);
          opts.onAccepted?.();
          persist();
        }
      }
    } finally {
      connected = false;
    }
    return received;
  };

  const loop = async (): Promise<void> => {
    let delay = minBackoff;
    while (!stop.signal.aborted) {
      try {
        if (await follow()) delay = minBackoff;
      } catch (err) {
        if (stop.signal.aborted) break;
        if (!(err instanceof CredentialRefused)) opts.onError?.(err);
        else if (store.refusal === null) {
          store.setRefusal(err.message);
          opts.onRefused?.(err.status);
          // A restart must not serve from the saved snapshot either (keys revoked since are unknown): it goes, after
          // any write under way.
          const file = opts.snapshotFile;
          if (file !== undefined) void Promise.resolve(writing).then(() => rm(file, { force: true }).catch((e: unknown) => opts.onError?.(e)));
        }
      }
      if (stop.signal.aborted) break;
      await sleep(delay, undefined, { signal: stop.signal }).catch(() => {});
      delay = Math.min(delay * 2, maxBackoff);
    }
  };

  return {
    start() {
      if (running !== null) return;
      if (opts.snapshotFile !== undefined && store.version === null && existsSync(opts.snapshotFile)) {
        try {
          store.replace(readSnapshotFile(opts.snapshotFile, fileKey));
        } catch (err) {
          opts.onError?.(err); // a bad file is not fatal: the control plane sends a fresh snapshot
        }
      }
      running = loop();
    },
    async close() {
      stop.abort();
      await running;
      await writing;
    },
    get connected() {
      return connected;
    },
    get version() {
      return store.version;
    },
    onVersion: (listener) => store.onVersion(listener),
  };
}
