import {
  closeSync,
  fdatasync,
  fdatasyncSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  appendFileSync,
  unlinkSync,
  writeSync,
  close,
} from 'node:fs';
import { join } from 'node:path';
import { usageRecordSchema, type UsageRecord } from '@infer/shared';
import { takePidLock } from '@infer/shared/pid-lock';

// A node's usage on its own disk until the control plane acknowledged it. `append` buffers the record's
// line; `commit` writes every buffered line with one write(2) (the reporter commits once per event-loop
// turn, before the answers of those records end), so a record survives a crash of this process (kill -9)
// from that instant. fdatasync is batched (group commit every `fsyncMs`), which bounds what a crash of
// the whole machine can lose to that window. Files are append-only segments of JSON lines: the active
// one is truncated once everything in it was acknowledged, older ones (rotated past `maxSegmentBytes`,
// or left by an earlier process) are deleted once acknowledged.

interface Segment {
  readonly path: string;
  fd: number | null;
  /** Holds only records the reporter did not keep in memory (see `beginSpill`). */
  spill: boolean;
  /** Records written to this segment and not yet acknowledged. */
  unacked: number;
  bytes: number;
}

/**
 * A spooled record, handed back to `ack` once the control plane stored it. Only its JSON is kept (one flat
 * string): queued records survive several young-generation collections, and a string is one object to copy
 * where the record object is fifteen.
 */
export interface SpoolEntry {
  /** The record as JSON (one line, without its newline), as written to the spool and sent in batches. */
  readonly json: string;
  readonly segment: Segment | null;
}

export interface UsageSpoolOptions {
  /** Group-commit interval of fdatasync (default 100 ms). */
  readonly fsyncMs?: number;
  /** Rotate the active segment past this size while older records are unacknowledged (default 8 MiB). */
  readonly maxSegmentBytes?: number;
  readonly onError?: (err: unknown) => void;
}

export interface UsageSpool {
  /** Unsent records left by an earlier process, oldest first (replay them). */
  readonly recovered: readonly SpoolEntry[];
  /** Lines of earlier segments that were not a usage record (a torn last write after a machine crash). */
  readonly skippedLines: number;
  /** Buffers the record's line for the next `commit` (until then it is in this process's memory only). */
  append(record: UsageRecord): SpoolEntry;
  /** Writes every buffered line with one write(2): durable against a process crash once this returns; throws on I/O errors. */
  commit(): void;
  /** The control plane stored these: their space can be reclaimed. */
  ack(entries: readonly SpoolEntry[]): void;
  /** Moves a record the control plane refuses outright to `rejected.ndjson` (kept for an operator), then acks it. */
  quarantine(entry: SpoolEntry): void;
  /**
   * From now on, appended records go to segments of their own that the caller does not hold in memory
   * (a control plane away for long must not grow the node's heap); `takeSpilled` reads them back.
   */
  beginSpill(): void;
  /** The spilled records, read back from disk, oldest first; appends go to an ordinary segment again. */
  takeSpilled(): SpoolEntry[];
  /** fdatasync now, stop, release the directory lock. Unacknowledged records stay for the next start. */
  close(): void;
}

const SEGMENT = /^usage-(\d+)\.ndjson$/;

/** Spool directories this process holds. */
const held = new Set<string>();

/** One spool per directory: a second node on the same directory would replay the same records. */
function takeLock(dir: string): string {
  const path = join(dir, 'lock');
  const holder = held.has(path) ? process.pid : takePidLock(path);
  if (holder !== null) throw new Error(`usage spool ${dir} is in use by process ${holder}; give each node its own USAGE_SPOOL_DIR`);
  held.add(path);
  return path;
}

function fsyncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Not every platform can fsync a directory; the segment's own fsync still holds its data.
  }
}

/** Opens (creating 0700) the spool directory, reads what an earlier process left, starts a new active segment. */
export function openUsageSpool(dir: string, opts: UsageSpoolOptions = {}): UsageSpool {
  const fsyncMs = opts.fsyncMs ?? 100;
  const maxSegmentBytes = opts.maxSegmentBytes ?? 8 * 1024 * 1024;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const lockPath = takeLock(dir);

  const recovered: SpoolEntry[] = [];
  let skippedLines = 0;
  let lastNumber = 0;
  const names = readdirSync(dir)
    .flatMap((name) => {
      const m = SEGMENT.exec(name);
      return m ? [{ name, n: Number(m[1]) }] : [];
    })
    .sort((a, b) => a.n - b.n);
  for (const { name, n } of names) {
    lastNumber = Math.max(lastNumber, n);
    const path = join(dir, name);
    const text = readFileSync(path, 'utf8');
    const segment: Segment = { path, fd: null, spill: false, unacked: 0, bytes: Buffer.byteLength(text) };
    for (const line of text.split('\n')) {
      if (line.length === 0) continue;
      let parsed;
      try {
        parsed = usageRecordSchema.safeParse(JSON.parse(line));
      } catch {
        parsed = null;
      }
      if (parsed?.success) {
        segment.unacked++;
        recovered.push({ json: line, segment });
      } else skippedLines++;
    }
    if (segment.unacked === 0) unlinkSync(path);
  }

  let active: Segment;
  const openSegment = (): Segment => {
    lastNumber++;
    const path = join(dir, `usage-${String(lastNumber).padStart(12, '0')}.ndjson`);
    const segment: Segment = { path, fd: openSync(path, 'a', 0o600), spill: false, unacked: 0, bytes: 0 };
    fsyncDir(dir);
    return segment;
  };
  active = openSegment();

  const spilled: Segment[] = [];
  /** Records (JSON) appended to the active segment and not yet written. */
  let buffered: string[] = [];

  const commit = (): void => {
    if (buffered.length === 0) return;
    const lines = buffered;
    buffered = [];
    writeSync(active.fd!, lines.length === 1 ? `${lines[0]!}\n` : `${lines.join('\n')}\n`);
    scheduleSync();
  };

  let syncTimer: NodeJS.Timeout | null = null;
  let syncing = false;
  let dirty = false;
  let closed = false;
  const sync = (): void => {
    syncTimer = null;
    if (!dirty || syncing || closed || active.fd === null) return;
    dirty = false;
    syncing = true;
    fdatasync(active.fd, (err) => {
      syncing = false;
      if (err) opts.onError?.(err);
      if (dirty) scheduleSync();
    });
  };
  const scheduleSync = (): void => {
    dirty = true;
    if (syncTimer === null && !closed) syncTimer = setTimeout(sync, fsyncMs);
  };

  const closeSegmentFd = (segment: Segment): void => {
    const fd = segment.fd;
    if (fd === null) return;
    segment.fd = null;
    // Its last records may still be in the page cache only: sync before letting go of the descriptor.
    fdatasync(fd, (err) => {
      if (err) opts.onError?.(err);
      close(fd, () => undefined);
    });
  };

  const reclaim = (segment: Segment): void => {
    if (segment.unacked > 0) return;
    if (segment === active) {
      buffered = []; // acknowledged before they were written: nothing of them needs the disk
      if (segment.bytes > 0 && segment.fd !== null) {
        ftruncateSync(segment.fd, 0);
        segment.bytes = 0;
      }
      return;
    }
    closeSegmentFd(segment);
    try {
      unlinkSync(segment.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') opts.onError?.(err);
    }
  };

  return {
    recovered,
    skippedLines,
    append(record) {
      if (closed) throw new Error('usage spool is closed');
      if (active.bytes >= maxSegmentBytes && active.unacked > 0) {
        commit();
        const spill = active.spill;
        closeSegmentFd(active);
        active = openSegment();
        active.spill = spill;
        if (spill) spilled.push(active);
      }
      const json = JSON.stringify(record);
      buffered.push(json);
      active.bytes += json.length + 1; // characters: the rotation size is approximate
      active.unacked++;
      return { json, segment: active };
    },
    commit,
    ack(entries) {
      const touched = new Set<Segment>();
      for (const e of entries) {
        if (e.segment === null) continue;
        e.segment.unacked--;
        touched.add(e.segment);
      }
      for (const s of touched) reclaim(s);
    },
    beginSpill() {
      if (active.spill) return;
      commit();
      if (active.unacked > 0) {
        closeSegmentFd(active);
        active = openSegment();
      }
      active.spill = true;
      spilled.push(active);
    },
    takeSpilled() {
      commit();
      if (active.spill) {
        closeSegmentFd(active);
        active = openSegment();
      }
      const entries: SpoolEntry[] = [];
      for (const segment of spilled.splice(0)) {
        segment.spill = false;
        let text = '';
        try {
          text = readFileSync(segment.path, 'utf8');
        } catch (err) {
          opts.onError?.(err);
        }
        let found = 0;
        for (const line of text.split('\n')) {
          if (line.length === 0) continue;
          try {
            const parsed = usageRecordSchema.safeParse(JSON.parse(line));
            if (parsed.success) {
              entries.push({ json: line, segment });
              found++;
            }
          } catch {
            // a line this process wrote is always whole; nothing to do
          }
        }
        segment.unacked = found;
        reclaim(segment);
      }
      return entries;
    },
    quarantine(entry) {
      appendFileSync(join(dir, 'rejected.ndjson'), `${entry.json}\n`, { mode: 0o600 });
      this.ack([entry]);
    },
    close() {
      if (closed) return;
      closed = true;
      if (syncTimer !== null) clearTimeout(syncTimer);
      try {
        commit();
      } catch (err) {
        opts.onError?.(err);
      }
      const fd = active.fd;
      if (fd !== null) {
        active.fd = null;
        try {
          fdatasyncSync(fd);
        } finally {
          closeSync(fd);
        }
      }
      if (active.unacked === 0) {
        try {
          unlinkSync(active.path);
        } catch {
          // already gone
        }
      }
      held.delete(lockPath);
      try {
        unlinkSync(lockPath);
      } catch {
        // already gone
      }
    },
  };
}
