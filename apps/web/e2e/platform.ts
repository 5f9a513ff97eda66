// Starts the whole platform the way `pnpm start` does (node scripts/start.ts) on free ports with a
// temporary DATA_DIR, and reads the demo values it writes to demo.env.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

export interface Platform {
  readonly env: Readonly<Record<string, string>>;
  readonly consoleUrl: string;
  readonly logs: () => string;
  stop(): Promise<void>;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

/**
 * The kernel's range of local ports for outgoing connections (Linux). A port found free now and bound seconds later
 * (the platform starts its processes one after another) must lie outside it: any outgoing connection meanwhile (a
 * readiness poll, a runtime's client) may be given it, and the listener then fails with EADDRINUSE.
 */
function ephemeralPorts(): readonly [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low !== undefined && high !== undefined && low > 0 && high >= low) return [low, high];
  } catch {
    // Not Linux: its usual range.
  }
  return [32768, 60999];
}

/** A base port with `count` consecutive free ports, outside the kernel's ephemeral range (below it where there is room). */
export async function freePortRange(count: number): Promise<number> {
  const [low, high] = ephemeralPorts();
  const [from, to] = low - count > 12_000 ? [10_000, low - count] : [high + 1, 65_535 - count];
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = from + Math.floor(Math.random() * (to - from));
    let ok = true;
    for (let p = base; p < base + count && ok; p++) ok = await portFree(p);
    if (ok) return base;
  }
  throw new Error('no free port range');
}

function parseEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

function withoutDatabaseUrl(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { DATABASE_URL: _ignored, ...rest } = env;
  return rest;
}

export async function startPlatform(opts: { timeoutMs?: number } = {}): Promise<Platform> {
  const dataDir = mkdtempSync(join(tmpdir(), 'infer-e2e-'));
  const base = await freePortRange(24);
  let output = '';
  const child: ChildProcess = spawn(process.execPath, [join(repoRoot, 'scripts/start.ts')], {
    cwd: repoRoot,
    // As the README's `pnpm start` runs on a fresh machine: embedded PGlite, never CI's DATABASE_URL.
    env: {
      ...withoutDatabaseUrl(process.env),
      DATA_DIR: dataDir,
      ADMIN_PORT: String(base),
      PORT: String(base + 1),
      SIM_BASE_PORT: String(base + 4),
      SIM_TTFT_MS: '40',
      SIM_ITL_MS: '25',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const append = (d: Buffer) => {
    output += d.toString('utf8');
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  const exited = new Promise<void>((res) => child.once('exit', () => res()));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 8000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dataDir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  while (!output.includes('is running')) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`scripts/start.ts exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output.slice(-4000)}`);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`scripts/start.ts was not ready in time:\n${output.slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const env = Object.freeze(parseEnv(readFileSync(join(dataDir, 'demo.env'), 'utf8')));
  const consoleUrl = env['CONSOLE_URL'] ?? `http://localhost:${base}/`;
  return { env, consoleUrl, logs: () => output, stop };
}
