// `pnpm start` as a user runs it: a fresh DATA_DIR, the README's curl calls as printed, Ctrl-C, a restart.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePortRange } from '../apps/web/e2e/platform.ts';

const root = resolve(import.meta.dirname, '..');

/**
 * `viaPnpm`: as `pnpm start` runs it, in a process group of its own, so that `stop` can send SIGINT to the whole
 * group as a terminal's Ctrl-C does (pnpm gets it too, and would print ELIFECYCLE for a non-zero exit).
 */
function startPlatform(env: Record<string, string>, viaPnpm = false, viaWrapper = false): { child: ChildProcess; output: () => string; ready: Promise<void> } {
  // As the README runs it on a fresh machine: embedded PGlite, never CI's DATABASE_URL.
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const script = join(root, 'scripts/start.ts');
  const child = viaWrapper
    ? // A parent that dies of SIGTERM without passing it on, as the `node` package's shell wrapper does (`; true`: no exec).
      spawn('sh', ['-c', `${JSON.stringify(process.execPath)} ${JSON.stringify(script)}; true`], {
        cwd: root,
        env: { ...inherited, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : viaPnpm
      ? spawn('pnpm', ['start'], {
          cwd: pnpmProject(),
          env: { ...inherited, ...env, PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}` },
          stdio: ['ignore', 'pipe', 'pipe'],
          detached: true,
        })
      : spawn(process.execPath, [join(root, 'scripts/start.ts')], { cwd: root, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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

/**
 * A package whose `start` script runs scripts/start.ts with this Node (the root's `pnpm start` would first
 * rebuild the console when its sources changed, which is not what this test is about).
 */
const pnpmProjects: string[] = [];
function pnpmProject(): string {
  const dir = mkdtempSync(join(tmpdir(), 'infer-start-pnpm-'));
  pnpmProjects.push(dir);
  // The root's own `start` script, with the script's absolute path. Its `exec` and `trap '' INT` are what let a
  // clean Ctrl-C exit 0: pnpm's `sh -c`, and the shell wrapper that .bin/node is, would die of the SIGINT otherwise.
  const rootScripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const script = rootScripts['start']!.replace('scripts/start.ts', JSON.stringify(join(root, 'scripts/start.ts')));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'start-under-pnpm', private: true, scripts: { start: script } }));
  // The root's node_modules, so that `node` in the script is what it is for a user: the `node` devDependency's
  // node_modules/.bin/node, a shell wrapper that runs Node as its child (pnpm puts .bin first on PATH).
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/** Ctrl-C: SIGINT to the process, or to its whole process group when it has one of its own. */
async function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  if (child.spawnargs[0] === 'pnpm') process.kill(-child.pid!, 'SIGINT');
  else child.kill('SIGINT');
  return exited;
}

/** Runs scripts/start.ts to its end (it is expected to refuse); its exit code and output. */
function runToEnd(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(process.execPath, [join(root, 'scripts/start.ts')], { cwd: root, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

/** Polls (every few ms) until `file` exists: what a script that waits for demo.env does. */
async function whenExists(file: string, child: ChildProcess): Promise<void> {
  while (!existsSync(file)) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before ${file} appeared`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A shared chat call with demo.env's values, as a script would make it. */
function chatWith(demo: Record<string, string>, key = demo['INFERENCE_API_KEY']!, more: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${demo['SHARED_BASE_URL']}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: demo['SHARED_MODEL'], messages: [{ role: 'user', content: 'ready?' }], ...more }),
  });
}

/** One line naming the port and the variable, no banner, no stack trace, a non-zero exit. */
function expectRefusal(r: { code: number | null; output: string }, port: string, variable: string): void {
  expect(r.code, r.output).not.toBe(0);
  const lines = r.output.trim().split('\n');
  expect(lines, r.output).toHaveLength(1);
  expect(lines[0]).toContain(`port ${port} `);
  expect(lines[0]).toContain(variable);
  expect(r.output).not.toContain('is running');
  expect(r.output).not.toMatch(/\n\s+at /);
}

function readEnv(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/** The README's curl calls, exactly as printed, one command each. */
function readmeCurls(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block = readme.slice(readme.indexOf('set -a; . .data/demo.env; set +a'));
  const body = block.slice(block.indexOf('\n') + 1, block.indexOf('```'));
  return body
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((l) => l.startsWith('curl '));
}

/** The README's admin-token block (log in, mint and export ADMIN_TOKEN, call GraphQL with it), as printed. */
function readmeAdminTokenBlock(): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const start = readme.lastIndexOf('```sh\n', readme.indexOf('export ADMIN_TOKEN=')) + '```sh\n'.length;
  return readme.slice(start, readme.indexOf('```', start));
}

function isUp(url: string): Promise<boolean> {
  return fetch(url).then(
    (r) => r.arrayBuffer().then(() => true),
    () => false,
  );
}

describe('pnpm start', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'infer-start-'));
  afterAll(() => {
    for (const dir of [dataDir, ...pnpmProjects]) rmSync(dir, { recursive: true, force: true });
  });

  it('runs the platform, answers the README curl calls, stops on Ctrl-C and keeps its key across restarts', async () => {
    // Outside the kernel's ephemeral range: the data plane binds its port after the control plane is up.
    const base = await freePortRange(12);
    const env = {
      DATA_DIR: dataDir,
      ADMIN_PORT: String(base),
      PORT: String(base + 1),
      SIM_BASE_PORT: String(base + 2),
      SIM_TTFT_MS: '5',
      SIM_ITL_MS: '1',
      LOG_LEVEL: 'warn',
    };
    const first = startPlatform(env);
    try {
      // demo.env appears only when everything answers: a call made the moment it appears succeeds.
      await whenExists(join(dataDir, 'demo.env'), first.child);
      expect((await chatWith(readEnv(join(dataDir, 'demo.env')))).status).toBe(200);
      await first.ready;
      const demoFile = join(dataDir, 'demo.env');
      expect(statSync(demoFile).mode & 0o777).toBe(0o600);
      const demo = readEnv(demoFile);
      for (const name of [
        'CONSOLE_URL',
        'SHARED_BASE_URL',
        'DEDICATED_BASE_URL',
        'SHARED_MODEL',
        'DEDICATED_MODEL',
        'INFERENCE_API_KEY',
        'ADMIN_EMAIL',
        'ADMIN_PASSWORD',
      ]) {
        expect(demo[name], name).toBeTruthy();
      }
      expect(demo['SHARED_BASE_URL']).toMatch(/\/endpoints\/v1$/);
      expect(demo['DEDICATED_BASE_URL']).toMatch(/\/funccall\/[^/]+\/endpoints\/[^/]+\/v1$/);
      expect(demo['DEDICATED_MODEL']).toBe('Meta/Llama-3.3-70B-Instruct'); // the console's form, which the data plane takes
      expect(first.output()).toContain(demo['INFERENCE_API_KEY']);
      // The data plane's internal metrics, at the address the banner prints, count the call made above.
      const metricsUrl = /Metrics \(internal\)\s+(\S+)/.exec(first.output())?.[1];
      expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      expect(await (await fetch(metricsUrl!)).text()).toMatch(/dataplane_requests_total\{[^}]*status="200"[^}]*\} [1-9]/);

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

      // The README's admin token commands, as printed (in a scratch directory: they write ./cookies).
      const scratch = mkdtempSync(join(tmpdir(), 'infer-start-readme-'));
      try {
        const block = readmeAdminTokenBlock().replaceAll('.data/demo.env', demoFile);
        const run = spawnSync('bash', ['-e', '-c', block], { cwd: scratch, encoding: 'utf8', timeout: 30_000 });
        expect(run.status, run.stderr).toBe(0);
        expect(JSON.parse(run.stdout), run.stdout).toMatchObject({ data: { viewer: { kind: 'ADMIN_TOKEN', isPlatformAdmin: true } } });
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }

      // A second pnpm start while this one runs: one line naming the port and its variable, nothing touched.
      const before = readFileSync(demoFile, 'utf8');
      expectRefusal(await runToEnd(env), env.ADMIN_PORT, 'ADMIN_PORT');
      expectRefusal(await runToEnd({ ...env, ADMIN_PORT: String(await freePortRange(1)) }), env.PORT, 'PORT');
      const otherDir = mkdtempSync(join(tmpdir(), 'infer-start-other-'));
      try {
        const other = await freePortRange(2);
        const r = await runToEnd({ ...env, DATA_DIR: otherDir, ADMIN_PORT: String(other), PORT: String(other + 1) });
        expectRefusal(r, env.SIM_BASE_PORT, 'SIM_BASE_PORT');
        expect(existsSync(join(otherDir, 'pglite')), 'the database seeded with the busy ports is not kept').toBe(false);
      } finally {
        rmSync(otherDir, { recursive: true, force: true });
      }
      // The same DATA_DIR on free ports: refused before its database is opened (the embedded PostgreSQL takes one process).
      const free = await freePortRange(3);
      const same = await runToEnd({ ...env, ADMIN_PORT: String(free), PORT: String(free + 1), SIM_BASE_PORT: String(free + 2) });
      expect(same.code).not.toBe(0);
      expect(same.output.trim().split('\n'), same.output).toEqual([
        `[start] ${dataDir} is in use by another pnpm start (process ${first.child.pid}): stop it, or set DATA_DIR to another folder`,
      ]);
      // A variable with a bad value: one line naming it, no stack trace.
      const bad = await runToEnd({ ...env, ADMIN_PORT: 'abc' });
      expect(bad.code).not.toBe(0);
      expect(bad.output.trim().split('\n'), bad.output).toHaveLength(1);
      expect(bad.output).toMatch(/^\[start\] .*ADMIN_PORT/);
      expect(readFileSync(demoFile, 'utf8')).toBe(before);
      expect((await chatWith(demo)).status).toBe(200);

      // Ctrl-C while a stream is in flight: the data plane stops first and lets it finish before the runtimes stop.
      const inFlight = await chatWith(demo, undefined, { max_tokens: 1500, stream: true, stream_options: { include_usage: true } });
      expect(inFlight.status).toBe(200);
      const reader = inFlight.body!.getReader();
      const decoder = new TextDecoder();
      let streamed = decoder.decode((await reader.read()).value, { stream: true }); // the stream has begun
      const stopped = stop(first.child);
      for (let r = await reader.read(); !r.done; r = await reader.read()) streamed += decoder.decode(r.value, { stream: true });
      expect(await stopped, first.output()).toBe(0);
      expect(streamed).not.toContain('"error"');
      expect(streamed.trimEnd().endsWith('data: [DONE]'), streamed.slice(-300)).toBe(true);
      expect(streamed).toContain('"completion_tokens":1500');
    } finally {
      expect(await stop(first.child), first.output()).toBe(0);
    }
    // Ctrl-C stopped every process it started.
    expect(await isUp(`http://127.0.0.1:${env.PORT}/healthz`)).toBe(false);
    expect(await isUp(`http://127.0.0.1:${env.ADMIN_PORT}/healthz`)).toBe(false);
    expect(await isUp(`http://127.0.0.1:${env.SIM_BASE_PORT}/health`)).toBe(false);

    const key = readEnv(join(dataDir, 'demo.env'))['INFERENCE_API_KEY'];
    // This time under a parent that dies of SIGTERM without passing it on: pnpm start notices and stops everything.
    const second = startPlatform(env, false, true);
    try {
      await second.ready;
      const demo = readEnv(join(dataDir, 'demo.env'));
      expect(demo['INFERENCE_API_KEY']).toBe(key);
      expect((await chatWith(demo, key!)).status).toBe(200);
    } finally {
      second.child.kill('SIGTERM');
      const deadline = Date.now() + 60_000;
      const anyUp = async () =>
        (await isUp(`http://127.0.0.1:${env.PORT}/healthz`)) ||
        (await isUp(`http://127.0.0.1:${env.ADMIN_PORT}/healthz`)) ||
        (await isUp(`http://127.0.0.1:${env.SIM_BASE_PORT}/health`));
      const lock = join(dataDir, 'start.lock');
      while (((await anyUp()) || existsSync(lock)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(await anyUp(), second.output()).toBe(false);
      expect(existsSync(lock), 'the DATA_DIR lock is given up').toBe(false);
    }

    // Without demo.env the old secrets cannot be shown again (only hashes are stored): a new key is issued.
    // This time under pnpm, stopped by a terminal's Ctrl-C (SIGINT to the whole process group).
    rmSync(join(dataDir, 'demo.env'));
    const third = startPlatform(env, true);
    try {
      await whenExists(join(dataDir, 'demo.env'), third.child);
      const demo = readEnv(join(dataDir, 'demo.env'));
      expect((await chatWith(demo)).status).toBe(200);
      expect(demo['INFERENCE_API_KEY']).not.toBe(key);
      expect((await chatWith(demo, key!)).status).toBe(200); // the earlier key was not revoked, just no longer printed
      await third.ready;
    } finally {
      expect(await stop(third.child), third.output()).toBe(0);
    }
    expect(third.output()).not.toContain('ELIFECYCLE');
    expect(third.output()).not.toContain('exited (');
  }, 240_000);
});
