import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { UsageRecord } from '@infer/shared';
import { createUsageReporter } from '../src/index.ts';
import { openUsageSpool } from '../src/usage/usage-spool.ts';
import { deadUrl, fakeRecord, startUsageServer, waitFor } from './helpers.ts';

const dirs: string[] = [];
const spoolDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'usage-spool-'));
  dirs.push(d);
  return join(d, 'spool');
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const segmentBytes = (dir: string): number =>
  readdirSync(dir)
    .filter((n) => n.startsWith('usage-'))
    .reduce((sum, n) => sum + statSync(join(dir, n)).size, 0);

describe('usage spool', () => {
  it('has each record on disk when whenDurable() calls back (one write per event-loop turn), and replays what was never acknowledged', async () => {
    const dir = spoolDir();
    const rep = createUsageReporter({ url: await deadUrl(), nodeToken: 't', flushMs: 60_000, spoolDir: dir });
    const fileText = (): string =>
      readdirSync(dir)
        .filter((n) => n.startsWith('usage-'))
        .map((n) => readFileSync(join(dir, n), 'utf8'))
        .join('');
    for (let i = 0; i < 5; i++) rep.record(fakeRecord(`crash-${i}`));
    // Buffered in this turn: not written yet, and an answer waiting on them is not released yet.
    expect(fileText()).toBe('');
    let released = false;
    const durable = new Promise<string>((resolve) =>
      rep.whenDurable!(() => {
        released = true;
        resolve(fileText()); // what a kill -9 at the instant the answer ends would leave
      }),
    );
    expect(released).toBe(false);
    // Nothing was flushed nor closed: the lines are in the file when the answers may end.
    expect((await durable).trim().split('\n')).toHaveLength(5);
    // With nothing buffered, an answer is released at once.
    let now = false;
    rep.whenDurable!(() => (now = true));
    expect(now).toBe(true);
    expect(statSync(dir).mode & 0o777).toBe(0o700);

    // A second process on the same directory is refused while the first lives.
    expect(() => openUsageSpool(dir)).toThrow(/in use by process/);
    // (A crash, kill -9 of a real node, is in test/fault/usage-durability.test.ts; here the records were never acknowledged.)
    expect((await rep.close()).remaining).toBe(5);

    const s = await startUsageServer();
    const next = createUsageReporter({ url: s.url, nodeToken: 't', flushMs: 20, spoolDir: dir });
    try {
      expect(next.recovered).toBe(5);
      await waitFor(() => s.records.length === 5);
      expect(s.records.map((r) => r.requestId)).toEqual([0, 1, 2, 3, 4].map((i) => `crash-${i}`));
      await waitFor(() => next.pending() === 0);
      expect(segmentBytes(dir)).toBe(0); // acknowledged: the old segment is gone, the active one empty
    } finally {
      await next.close();
      await s.close();
    }
  });

  it('keeps everything across a stop while the control plane is down, then delivers it once', async () => {
    const dir = spoolDir();
    const down = createUsageReporter({ url: await deadUrl(), nodeToken: 't', flushMs: 10, spoolDir: dir });
    for (let i = 0; i < 199; i++) down.record(fakeRecord(`down-${i}`));
    const left = await down.close();
    expect(left.remaining).toBe(199);

    const s = await startUsageServer();
    const up = createUsageReporter({ url: s.url, nodeToken: 't', flushMs: 10, spoolDir: dir, maxBatch: 50 });
    try {
      expect(up.recovered).toBe(199);
      await waitFor(() => s.records.length === 199);
      expect(new Set(s.records.map((r) => r.requestId)).size).toBe(199);
      expect((await up.close()).remaining).toBe(0);
      expect(readdirSync(dir).filter((n) => n.startsWith('usage-'))).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('holds at most maxPending records in memory; the rest wait on disk and are all delivered', async () => {
    const dir = spoolDir();
    const s = await startUsageServer();
    s.failNext(3);
    const rep = createUsageReporter({ url: s.url, nodeToken: 't', flushMs: 20, spoolDir: dir, maxPending: 10, maxBatch: 8 });
    try {
      for (let i = 0; i < 50; i++) rep.record(fakeRecord(`spill-${i}`));
      expect(rep.pending()).toBe(50);
      await waitFor(() => s.records.length === 50);
      expect(new Set(s.records.map((r) => r.requestId)).size).toBe(50);
      await waitFor(() => rep.pending() === 0);
      expect(segmentBytes(dir)).toBe(0);
    } finally {
      await rep.close();
      await s.close();
    }
  });

  it('keeps the records a control plane names as rejected in rejected.ndjson, and acknowledges the rest', async () => {
    const dir = spoolDir();
    const s = await startUsageServer();
    s.refuse(['named-2']);
    const errors: string[] = [];
    const rep = createUsageReporter({ url: s.url, nodeToken: 't', flushMs: 20, spoolDir: dir, onError: (e) => void errors.push(String(e)) });
    try {
      for (let i = 1; i <= 3; i++) rep.record(fakeRecord(`named-${i}`));
      await waitFor(() => rep.pending() === 0);
      expect(s.records.map((r) => r.requestId).sort()).toEqual(['named-1', 'named-3']);
      const kept = readFileSync(join(dir, 'rejected.ndjson'), 'utf8').trim().split('\n');
      expect(kept.map((l) => (JSON.parse(l) as UsageRecord).requestId)).toEqual(['named-2']);
      expect(segmentBytes(dir)).toBe(0);
      expect(errors.some((e) => e.includes('rejected 1 usage record') && e.includes('rejected.ndjson'))).toBe(true);
    } finally {
      await rep.close();
      await s.close();
    }
  });

  it('rotates segments while records are unacknowledged and deletes them once acknowledged', async () => {
    const dir = spoolDir();
    const spool = openUsageSpool(dir, { maxSegmentBytes: 1024 });
    const entries = Array.from({ length: 40 }, (_, i) => spool.append(fakeRecord(`rot-${i}`)));
    spool.commit();
    expect(readdirSync(dir).filter((n) => n.startsWith('usage-')).length).toBeGreaterThan(2);
    spool.ack(entries);
    expect(readdirSync(dir).filter((n) => n.startsWith('usage-')).length).toBe(1);
    expect(segmentBytes(dir)).toBe(0);
    spool.close();
  });

  it('skips a torn last line and moves a record the control plane refuses aside instead of blocking', async () => {
    const dir = spoolDir();
    const spool = openUsageSpool(dir);
    spool.append(fakeRecord('ok-1'));
    spool.close();
    const seg = readdirSync(dir).find((n) => n.startsWith('usage-'))!;
    const { appendFileSync } = await import('node:fs');
    appendFileSync(join(dir, seg), '{"requestId":"torn');
    const reopened = openUsageSpool(dir);
    expect(reopened.recovered.map((e) => (JSON.parse(e.json) as UsageRecord).requestId)).toEqual(['ok-1']);
    expect(reopened.skippedLines).toBe(1);
    reopened.quarantine(reopened.recovered[0]!);
    expect(readFileSync(join(dir, 'rejected.ndjson'), 'utf8')).toContain('ok-1');
    reopened.close();
    expect(readdirSync(dir).filter((n) => n.startsWith('usage-'))).toEqual([]);
  });
});
