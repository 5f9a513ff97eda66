// `pnpm start` as a user runs it: a fresh DATA_DIR, the README's curl calls as printed, Ctrl-C, a restart.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** Consecutive free ports for the simulators (the seed uses SIM_BASE_PORT and the next few). */
async function freeRange(n: number): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const base = 20000 + Math.floor(Math.random() * 30000);
    const ok = await Promise.all(Array.from({ length: n }, (_, i) => new Promise<boolean>((res) => {
      const s = createServer();
      s.once('error', () => res(false));
      s.listen(base + i, '127.0.0.1', () => s.close(() => res(true)));
    })));
    if (ok.every(Boolean)) return base;
  }
  throw new Error('no free port range');
}

function startPlatform(env: Record<string, string>): { child: ChildProcess; output: () => string; ready: Promise<void> } {
  // As the README runs it on a fresh machine: embedded PGlite, never CI's DATABASE_URL.
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(process.execPath, [join(root, 'scripts/start.ts')], { cwd: root, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const ready = new Promise<void>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`pnpm start not ready:\n${out}`)), 90_000);
    child.stdout!.on('data', () => {
      if (out.includes('Ctrl-C stops everything')) {
        clearTimeout(timer);
        res();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`pnpm start exited with ${code}:\n${out}`));
    });
  });
  return { child, output: () => out, ready };
}

async function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGINT');
  return exited;
}

function readEnv(file: string): Record<string, string> {
  return Object.fromEntries(readFileSync(file, 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

/** The README's curl calls, exactly as printed, one command each. */
function readmeCurls(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block = readme.slice(readme.indexOf('set -a; . .data/demo.env; set +a'));
  const body = block.slice(block.indexOf('\n') + 1, block.indexOf('```'));
  return body.replace(/\\\n/g, ' ').split('\n').filter((l) => l.startsWith('curl '));
}

function isUp(url: string): Promise<boolean> {
  return fetch(url).then((r) => r.arrayBuffer().then(() => true), () => false);
}

describe('pnpm start', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'infer-start-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('runs the platform, answers the README curl calls, stops on Ctrl-C and keeps its key across restarts', async () => {
    const env = {
      DATA_DIR: dataDir, ADMIN_PORT: String(await freePort()), PORT: String(await freePort()),
      SIM_BASE_PORT: String(await freeRange(10)), SIM_TTFT_MS: '5', SIM_ITL_MS: '1', LOG_LEVEL: 'warn',
    };
    const first = startPlatform(env);
    try {
      await first.ready;
      const demoFile = join(dataDir, 'demo.env');
      expect(statSync(demoFile).mode & 0o777).toBe(0o600);
      const demo = readEnv(demoFile);
      for (const name of ['CONSOLE_URL', 'SHARED_BASE_URL', 'DEDICATED_BASE_URL', 'SHARED_MODEL', 'DEDICATED_MODEL', 'INFERENCE_API_KEY', 'ADMIN_EMAIL', 'ADMIN_PASSWORD']) {
        expect(demo[name], name).toBeTruthy();
      }
      expect(demo['SHARED_BASE_URL']).toMatch(/\/endpoints\/v1$/);
      expect(demo['DEDICATED_BASE_URL']).toMatch(/\/funccall\/[^/]+\/endpoints\/[^/]+\/v1$/);
      expect(demo['DEDICATED_MODEL']).toContain('/');
      expect(first.output()).toContain(demo['INFERENCE_API_KEY']);

      const curls = readmeCurls();
      expect(curls.length).toBeGreaterThanOrEqual(5);
      for (const cmd of curls) {
        const run = spawnSync('bash', ['-c', `set -a; . ${demoFile}; set +a; ${cmd}`], { encoding: 'utf8', timeout: 30_000 });
        expect(run.status, cmd).toBe(0);
        const out = run.stdout.trim();
        if (cmd.includes('/models')) expect(JSON.parse(out)).toMatchObject({ object: 'list' });
        else if (/stream\\?": \\?"?true/.test(cmd)) expect(out.endsWith('data: [DONE]'), `${cmd}\n${out.slice(-300)}`).toBe(true);
        else expect(JSON.parse(out), cmd).toMatchObject({ object: 'chat.completion' });
      }
    } finally {
      expect(await stop(first.child)).toBe(0);
    }
    // Ctrl-C stopped every process it started.
    expect(await isUp(`http://127.0.0.1:${env.PORT}/healthz`)).toBe(false);
    expect(await isUp(`http://127.0.0.1:${env.ADMIN_PORT}/healthz`)).toBe(false);
    expect(await isUp(`http://127.0.0.1:${env.SIM_BASE_PORT}/health`)).toBe(false);

    const key = readEnv(join(dataDir, 'demo.env'))['INFERENCE_API_KEY'];
    const second = startPlatform(env);
    try {
      await second.ready;
      const demo = readEnv(join(dataDir, 'demo.env'));
      expect(demo['INFERENCE_API_KEY']).toBe(key);
      const res = await fetch(`${demo['SHARED_BASE_URL']}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: demo['SHARED_MODEL'], messages: [{ role: 'user', content: 'still there?' }] }),
      });
      expect(res.status).toBe(200);
    } finally {
      expect(await stop(second.child)).toBe(0);
    }

    // Without demo.env the old secrets cannot be shown again (only hashes are stored): a new key is issued.
    rmSync(join(dataDir, 'demo.env'));
    const third = startPlatform(env);
    try {
      await third.ready;
      const demo = readEnv(join(dataDir, 'demo.env'));
      expect(demo['INFERENCE_API_KEY']).not.toBe(key);
      const chatWith = (secret: string) => fetch(`${demo['SHARED_BASE_URL']}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: demo['SHARED_MODEL'], messages: [{ role: 'user', content: 'new key?' }] }),
      });
      expect((await chatWith(demo['INFERENCE_API_KEY']!)).status).toBe(200);
      expect((await chatWith(key!)).status).toBe(200); // the earlier key was not revoked, just no longer printed
    } finally {
      expect(await stop(third.child)).toBe(0);
    }
  }, 240_000);
});
