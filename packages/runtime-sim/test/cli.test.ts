import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { postChat, userMessages } from './sim-helpers.ts';

const CLI = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
let child: ChildProcess | undefined;
afterEach(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
});

function firstLine(proc: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    proc.on('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
  });
}

describe('runtime-sim CLI', () => {
  it('starts from flags and SIM_* env, answers, and exits cleanly on SIGTERM', async () => {
    child = spawn(process.execPath, [CLI, '--port', '0', '--model', 'm-one', '--model', 'm-two', '--ttft-ms', '5'], {
      env: { ...process.env, SIM_MAX_CONTEXT_LENGTH: '100', SIM_API_KEY: 'k1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const line = await firstLine(child);
    const match = /^runtime-sim listening on (http:\/\/127\.0\.0\.1:\d+) models=m-one,m-two$/.exec(line);
    expect(match).not.toBeNull();
    const url = match![1]!;
    const auth = { headers: { authorization: 'Bearer k1' } };
    const ok = await postChat(url, { model: 'm-two', messages: userMessages('hello'), max_tokens: 4 }, auth);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(4);
    expect((await postChat(url, { model: 'm-one', messages: userMessages('hello'), max_tokens: 99 }, auth)).status).toBe(400);
    expect((await postChat(url, { model: 'm-one', messages: userMessages('hello') })).status).toBe(401);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });

  it('rejects a bad flag value with exit code 2 and a message naming it', async () => {
    child = spawn(process.execPath, [CLI, '--itl-ms', 'fast'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(err).toMatch(/--itl-ms must be a number/);
  });

  it('a port already in use is one line and exit code 1, not a stack trace', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    try {
      child = spawn(process.execPath, [CLI, '--port', String(port), '--host', '127.0.0.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let err = '';
      child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const [code] = await once(child, 'exit');
      expect(code).toBe(1);
      expect(err).toBe(`runtime-sim: port ${port} on 127.0.0.1 is already in use: choose another with --port\n`);
    } finally {
      taken.close();
    }
  });
});
