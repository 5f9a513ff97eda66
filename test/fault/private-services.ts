/**
 * Private PostgreSQL and Redis processes for fault tests: each on its own free port and temp dir, so a
 * test can stop, kill, freeze and restart them without touching the shared services (5432, 6379).
 *
 *   import { startPrivatePostgres, startPrivateRedis } from '../fault/private-services.ts';
 *
 *   const pg = await startPrivatePostgres();        // initdb + postgres; pg.url = postgres://postgres@127.0.0.1:<port>/postgres
 *   const redis = await startPrivateRedis();        // redis-server --save ''; redis.url = redis://127.0.0.1:<port>
 *   await pg.stop();      // graceful: PostgreSQL "fast" shutdown (SIGINT, what `pg_ctl -m fast` sends: a plain
 *                         // SIGTERM is "smart" shutdown and would wait for every pooled client); SIGTERM for Redis
 *   await pg.kill();      // SIGKILL to the server and every process it forked (postmaster and backends)
 *   pg.freeze();          // SIGSTOP to the server and its children: connections stay open, nothing answers
 *   pg.thaw();            // SIGCONT
 *   await pg.start();     // starts it again on the same port and data (after stop or kill); waits until it answers
 *   await pg.restart();   // stop() then start()
 *   await pg.close();     // kills it and removes its files; call in afterAll (safe to call twice)
 *
 * Every instance is also killed and removed when the test process exits, and a later start sweeps what
 * an earlier crashed run left behind (each temp dir records its owner's pid). Binaries come from
 * /usr/lib/postgresql/<newest>/bin and `redis-server` on PATH; PostgreSQL refuses to run as root, so
 * under root it runs as the `postgres` user. The data lives on tmpfs-like temp dirs with fsync off:
 * a crash of the database process loses nothing, a crash of the machine is not what these tests model.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { freePortRange } from '../../apps/web/e2e/platform.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface PrivateService {
  readonly port: number;
  /** Connection URL (PostgreSQL: database `postgres`, user `postgres`, trust auth). */
  readonly url: string;
  /** Pid of the running server process (the postmaster for PostgreSQL), or null while it is down. */
  readonly pid: number | null;
  /** Temp dir holding the data, the socket and `server.log`. */
  readonly dir: string;
  /** Last lines of the server's output, for failure messages. */
  output(): string;
  /** Graceful stop; resolves when the process has exited. */
  stop(): Promise<void>;
  /** SIGKILL to the server and its children; resolves when the main process has exited. */
  kill(): Promise<void>;
  /** SIGSTOP to the server and its children. */
  freeze(): void;
  /** SIGCONT to the server and its children. */
  thaw(): void;
  /** Starts the server again (same port, same data); resolves once it answers. */
  start(): Promise<void>;
  restart(): Promise<void>;
  /** Kills the server and removes its dir. */
  close(): Promise<void>;
}

const DIR_PREFIX = 'infer-fault-';
const OWNER_FILE = 'owner.pid';
const open = new Set<Instance>();

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, outside the kernel's ephemeral range (freePortRange): a service
 * started (or restarted after a kill) on it later must not find it taken by an outgoing connection meanwhile.
 */
export function freePort(): Promise<number> {
  return freePortRange(1);
}

/** True while the process exists and is not a zombie (an unreaped child of a PID 1 that never reaps). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}

/** The pids of a process's children, from /proc (PostgreSQL backends call setsid(), so a group signal misses them). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Signals a server process and every child it forked (the postmaster first, so it forks no new ones while stopped). */
function signalTree(pid: number, sig: NodeJS.Signals): void {
  const kids = childrenOf(pid);
  for (const p of [pid, ...kids]) {
    try {
      process.kill(p, sig);
    } catch {
      // already gone
    }
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** Kills and removes what earlier runs that died without cleaning up left in the temp dir. */
function sweepOrphans(): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const dir = join(tmpdir(), name);
    try {
      const [owner, server] = readFileSync(join(dir, OWNER_FILE), 'utf8').trim().split(' ').map(Number);
      if (owner && alive(owner)) continue;
      // Only if that pid is still our server (a pid can be reused by anything once the server is gone).
      if (server && cmdline(server).includes(dir)) {
        signalTree(server, 'SIGCONT');
        signalTree(server, 'SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // a dir being created right now by another run, or not ours
    }
  }
}

let hooked = false;
function installExitHook(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    for (const inst of open) inst.closeSync();
  });
}

/** The uid/gid to run PostgreSQL as (it refuses root), or null when we are not root. */
function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  const fields = line?.split(':');
  if (!fields?.[2] || !fields[3]) throw new Error('running as root and there is no postgres user to run PostgreSQL as');
  return { uid: Number(fields[2]), gid: Number(fields[3]) };
}

function postgresBin(name: string): string {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base) ? readdirSync(base).filter((v) => existsSync(join(base, v, 'bin', name))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no ${name} under ${base}/*/bin`);
  return join(base, newest, 'bin', name);
}

interface Spec {
  readonly kind: string;
  readonly dir: string;
  readonly port: number;
  readonly url: string;
  readonly user: { uid: number; gid: number } | null;
  readonly command: string;
  readonly args: readonly string[];
  readonly stopSignal: NodeJS.Signals;
  /** Resolves true once the server answers a real request. */
  probe(): Promise<boolean>;
}

class Instance implements PrivateService {
  readonly #spec: Spec;
  #proc: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #log = '';
  #closed = false;

  constructor(spec: Spec) {
    this.#spec = spec;
  }

  get port(): number {
    return this.#spec.port;
  }
  get url(): string {
    return this.#spec.url;
  }
  get dir(): string {
    return this.#spec.dir;
  }
  get pid(): number | null {
    return this.#proc?.pid ?? null;
  }

  output(): string {
    return this.#log;
  }

  async start(): Promise<void> {
    if (this.#closed) throw new Error(`${this.#spec.kind}: closed`);
    if (this.#proc) throw new Error(`${this.#spec.kind}: already running`);
    const s = this.#spec;
    const proc = spawn(s.command, [...s.args], {
      cwd: s.dir,
      detached: true, // not in the test runner's group: a Ctrl-C there must not reach it before cleanup
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(s.user ?? {}),
    });
    if (proc.pid === undefined) throw new Error(`${s.kind}: could not spawn ${s.command}`);
    proc.unref();
    const keep = (chunk: Buffer): void => {
      this.#log = (this.#log + chunk.toString('utf8')).slice(-4096);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    (proc.stdout as { unref?: () => void } | null)?.unref?.();
    (proc.stderr as { unref?: () => void } | null)?.unref?.();
    this.#proc = proc;
    this.#exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    void this.#exited.then(() => {
      if (this.#proc === proc) this.#proc = null;
    });
    writeFileSync(join(s.dir, OWNER_FILE), `${process.pid} ${proc.pid}`);

    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (this.#proc !== proc) throw new Error(`${s.kind} on port ${s.port} exited while starting:\n${this.#log}`);
      if (await s.probe()) return;
      await sleep(50);
    }
    throw new Error(`${s.kind} on port ${s.port} did not answer within 30 s:\n${this.#log}`);
  }

  async #signalAndWait(sig: NodeJS.Signals, tree: boolean): Promise<void> {
    const pid = this.#proc?.pid;
    if (!pid) return;
    const kids = childrenOf(pid);
    signalTree(pid, 'SIGCONT'); // a frozen server cannot act on anything else
    if (tree) signalTree(pid, sig);
    else process.kill(pid, sig);
    const timer = setTimeout(() => signalTree(pid, 'SIGKILL'), 20_000);
    await this.#exited;
    clearTimeout(timer);
    // Backends outliving a killed postmaster would keep its shared memory and block the next start.
    for (let i = 0; i < 100 && kids.some(alive); i++) {
      for (const k of kids) if (alive(k)) process.kill(k, 'SIGKILL');
      await sleep(20);
    }
    await this.#waitPortFree();
  }

  async #waitPortFree(): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const inUse = await new Promise<boolean>((resolve) => {
        const sock = connect(this.#spec.port, '127.0.0.1');
        sock.once('connect', () => {
          sock.destroy();
          resolve(true);
        });
        sock.once('error', () => resolve(false));
      });
      if (!inUse) return;
      await sleep(50);
    }
  }

  stop(): Promise<void> {
    return this.#signalAndWait(this.#spec.stopSignal, false);
  }

  kill(): Promise<void> {
    return this.#signalAndWait('SIGKILL', true);
  }

  freeze(): void {
    if (this.#proc?.pid) signalTree(this.#proc.pid, 'SIGSTOP');
  }

  thaw(): void {
    if (this.#proc?.pid) signalTree(this.#proc.pid, 'SIGCONT');
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.kill();
    this.closeSync();
  }

  /** For the exit hook: nothing asynchronous runs there. */
  closeSync(): void {
    this.#closed = true;
    open.delete(this);
    const pid = this.#proc?.pid;
    if (pid) {
      signalTree(pid, 'SIGCONT');
      signalTree(pid, 'SIGKILL');
    }
    rmSync(this.#spec.dir, { recursive: true, force: true });
  }
}

function makeDir(user: { uid: number; gid: number } | null): string {
  sweepOrphans();
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  writeFileSync(join(dir, OWNER_FILE), `${process.pid}`);
  if (user) chownSync(dir, user.uid, user.gid);
  return dir;
}

async function launch(make: (port: number) => Spec): Promise<PrivateService> {
  installExitHook();
  // The port was free a moment ago; another process may take it before the server binds, so try a few.
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const inst = new Instance(make(await freePort()));
    open.add(inst);
    try {
      await inst.start();
      return inst;
    } catch (err) {
      lastError = err;
      await inst.kill();
      open.delete(inst);
      if (attempt === 2) inst.closeSync();
    }
  }
  throw lastError;
}

export interface PrivatePostgresOptions {
  /** Extra `-c name=value` settings. */
  readonly settings?: Readonly<Record<string, string | number>>;
}

/** initdb into a temp dir and start `postgres` on a free port (TCP on 127.0.0.1 and a socket in the dir). */
export async function startPrivatePostgres(opts: PrivatePostgresOptions = {}): Promise<PrivateService> {
  const user = postgresUser();
  const template = makeDir(user);
  const data = join(template, 'data');
  // Another start may pick the same dir afterwards; initdb once per instance is ~1 s, acceptable.
  execFileSync(postgresBin('initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(user ?? {}),
  });
  const settings: Record<string, string | number> = {
    fsync: 'off',
    full_page_writes: 'off',
    max_connections: 100,
    shared_buffers: '32MB',
    log_min_messages: 'warning',
    ...opts.settings,
  };
  return launch((port) => {
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    return {
      kind: 'postgres',
      dir: template,
      port,
      url,
      user,
      command: postgresBin('postgres'),
      args: [
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        template,
        '-c',
        'listen_addresses=127.0.0.1',
        ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      ],
      stopSignal: 'SIGINT',
      probe: () => pgIsReady(port),
    };
  });
}

/** Start `redis-server` on a free port, no persistence. */
export async function startPrivateRedis(): Promise<PrivateService> {
  const dir = makeDir(null);
  return launch((port) => ({
    kind: 'redis',
    dir,
    port,
    url: `redis://127.0.0.1:${port}`,
    user: null,
    command: 'redis-server',
    args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'no'],
    stopSignal: 'SIGTERM',
    probe: () => redisPing(port),
  }));
}

/** pg_isready exits 0 only once the server accepts connections (not while starting up or in recovery). */
function pgIsReady(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(postgresBin('pg_isready'), ['-h', '127.0.0.1', '-p', String(port), '-t', '1', '-q'], (err) => resolve(!err));
  });
}

function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      sock.destroy();
      resolve(false);
    }, 1000);
    let buf = '';
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      buf += d.toString('utf8');
      if (buf.includes('\r\n')) {
        clearTimeout(timer);
        sock.destroy();
        resolve(buf.startsWith('+PONG'));
      }
    });
    sock.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}
