// A lock file holding its owner's pid (node only): one process at a time on a folder, and a lock left by a process that
// died (kill -9, a crash) is taken over rather than blocking every later start.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';

/** True while process `pid` exists (EPERM: it exists, as another user's). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock at `path` for this process: null when taken (or already this process's), else the live holder's pid. */
export function takePidLock(path: string): number | null {
  try {
    writeFileSync(path, String(process.pid), { mode: 0o600, flag: 'wx' });
    return null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const holder = Number.parseInt(readFileSync(path, 'utf8'), 10);
  if (Number.isInteger(holder) && holder !== process.pid && pidAlive(holder)) return holder;
  writeFileSync(path, String(process.pid), { mode: 0o600 }); // a stale lock of a dead process
  return null;
}

/** Gives the lock at `path` up, when this process holds it. */
export function releasePidLock(path: string): void {
  try {
    if (Number.parseInt(readFileSync(path, 'utf8'), 10) === process.pid) rmSync(path, { force: true });
  } catch {
    // already gone
  }
}
