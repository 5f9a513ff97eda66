import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { releasePidLock, takePidLock } from './pid-lock.ts';

describe('pid lock', () => {
  it('is taken once; a live holder refuses it, a dead one (kill -9) leaves it to be taken over', () => {
    const dir = mkdtempSync(join(tmpdir(), 'infer-lock-'));
    try {
      const lock = join(dir, 'start.lock');
      expect(takePidLock(lock)).toBeNull();
      expect(readFileSync(lock, 'utf8')).toBe(String(process.pid));
      // Another live process holds it.
      writeFileSync(lock, String(process.ppid));
      expect(takePidLock(lock)).toBe(process.ppid);
      releasePidLock(lock); // not ours: left alone
      expect(readFileSync(lock, 'utf8')).toBe(String(process.ppid));
      // A holder that is gone.
      const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
      writeFileSync(lock, String(dead));
      expect(takePidLock(lock)).toBeNull();
      expect(readFileSync(lock, 'utf8')).toBe(String(process.pid));
      releasePidLock(lock);
      expect(existsSync(lock)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
