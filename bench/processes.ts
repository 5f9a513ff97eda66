import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** A child Node process the bench started, with the tail of its output for error reports. */
export interface Child {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly pid: number;
  /** Last few KiB of stdout+stderr. */
  output(): string;
  exited(): boolean;
}

const children = new Set<Child>();

/** Kills every child still running (SIGKILL: nothing of theirs needs to survive the bench). */
export function killChildren(): void {
  for (const c of children) {
    if (!c.exited()) c.proc.kill('SIGKILL');
  }
  children.clear();
}

let hooked = false;
/** Makes sure children die with the bench: on normal exit, on errors and on Ctrl-C / SIGTERM. */
export function installExitHooks(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', killChildren);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      killChildren();
      process.exit(sig === 'SIGINT' ? 130 : 143);
    });
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => (port > 0 ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

/** Starts `node <script> ...args` on the same Node binary as the bench (so RSS is that process's own). */
export function startNode(
  name: string,
  script: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  nodeArgs: readonly string[] = [],
): Child {
  return startCommand(name, process.execPath, [...nodeArgs, script, ...args], env);
}

/** Polls `url` until it answers 2xx; throws (with the child's output) if the child dies or time runs out. */
export async function waitReady(child: Child, url: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (child.exited()) throw new Error(`${child.name} exited before it was ready:\n${child.output()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await sleep(100);
  }
  throw new Error(`${child.name} not ready at ${url} after ${timeoutMs} ms (${last}):\n${child.output()}`);
}

/** Resident set size of a process in KiB, from /proc/<pid>/status (null where /proc is missing). */
export function rssKiB(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m?.[1] ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** User + system CPU time of a process in ms, from /proc/<pid>/stat (null where /proc is missing). */
export function cpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (clock ticks of 10 ms).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/** Starts a non-Node command (e.g. nginx as a reference proxy) as a child the bench tracks and kills like its Node children. */
export function startCommand(name: string, command: string, args: readonly string[], env: Readonly<Record<string, string>> = {}): Child {
  installExitHooks();
  const proc = spawn(command, [...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  if (proc.pid === undefined) throw new Error(`${name}: could not spawn ${command}`);
  let buf = '';
  let done = false;
  const keep = (chunk: Buffer): void => {
    buf = (buf + chunk.toString('utf8')).slice(-4096);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  proc.on('exit', () => {
    done = true;
  });
  proc.on('error', (err) => {
    buf += `\n${err.message}`;
    done = true;
  });
  const child: Child = { name, proc, pid: proc.pid, output: () => buf, exited: () => done || proc.exitCode !== null };
  children.add(child);
  return child;
}

/** A process and its children (e.g. nginx's master and workers), from /proc/<pid>/stat's ppid field; [pid] where /proc is missing. */
export function processTree(pid: number): number[] {
  const parentOf = new Map<number, number>();
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      } catch {
        // exited meanwhile
      }
    }
  } catch {
    return [pid];
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [child, parent] of parentOf) if (parent === tree[i]) tree.push(child);
  return tree;
}

/**
 * The kernel's TcpExt ListenOverflows and ListenDrops counters (/proc/net/netstat, the whole network namespace): a
 * connection dropped because a listener's accept queue (its listen backlog) was full. Null where /proc is missing.
 */
export function listenDrops(): { readonly overflows: number; readonly drops: number } | null {
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
    const header = lines.findIndex((l) => l.startsWith('TcpExt:'));
    const names = lines[header]?.split(/\s+/) ?? [];
    const values = lines[header + 1]?.split(/\s+/) ?? [];
    const get = (name: string): number => Number(values[names.indexOf(name)] ?? NaN);
    const overflows = get('ListenOverflows');
    const drops = get('ListenDrops');
    return Number.isFinite(overflows) && Number.isFinite(drops) ? { overflows, drops } : null;
  } catch {
    return null;
  }
}

/**
 * Connections waiting in the accept queue of each listening TCP socket on `ports` (IPv4, /proc/net/tcp: a LISTEN
 * socket's rx_queue is its accept-queue length; the backlog caps it). Ports with no listener are absent.
 */
export function acceptQueues(ports: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  try {
    const text = readFileSync('/proc/net/tcp', 'utf8');
    for (const line of text.split('\n')) {
      // sl local_address rem_address st tx_queue:rx_queue ...
      const f = line.trim().split(/\s+/);
      if (f[3] !== '0A' || f[1] === undefined || f[4] === undefined) continue;
      const port = parseInt(f[1].slice(f[1].indexOf(':') + 1), 16);
      if (ports.includes(port)) out.set(port, Math.max(out.get(port) ?? 0, parseInt(f[4].slice(f[4].indexOf(':') + 1), 16)));
    }
  } catch {
    // no /proc
  }
  return out;
}
