import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEnv } from '../src/index.ts';
import { NAME, chatBody, deadUrl, makeSnapshot, post, startSim, startUsageServer, waitFor } from './helpers.ts';
import type { StartedSim, UsageServer } from './helpers.ts';

const SERVER = fileURLToPath(new URL('../src/server.ts', import.meta.url));

describe('env', () => {
  it('applies defaults and freezes', () => {
    const env = parseEnv({ CONFIG_FILE: '/tmp/x.json' });
    expect(env).toMatchObject({
      PORT: 8080,
      HOST: '127.0.0.1',
      USAGE_FLUSH_MS: 1000,
      BODY_LIMIT_BYTES: 1048576,
      CONNECT_TIMEOUT_MS: 5000,
      FIRST_BYTE_TIMEOUT_MS: 120000,
      IDLE_TIMEOUT_MS: 60000,
      LOG_LEVEL: 'warn',
    });
    expect(Object.isFrozen(env)).toBe(true);
  });
  it('names every bad value', () => {
    expect(() => parseEnv({ PORT: 'eighty', CONTROL_PLANE_URL: 'not a url', LOG_LEVEL: 'loud' })).toThrow(
      /PORT: must be a number[\s\S]*CONTROL_PLANE_URL[\s\S]*LOG_LEVEL/,
    );
  });
  it('requires CONTROL_PLANE_URL + NODE_TOKEN or CONFIG_FILE', () => {
    expect(() => parseEnv({})).toThrow(/CONFIG_FILE/);
    expect(() => parseEnv({ CONTROL_PLANE_URL: 'http://cp:8081' })).toThrow(/NODE_TOKEN/);
    expect(parseEnv({ CONTROL_PLANE_URL: 'http://cp:8081', NODE_TOKEN: 't' }).NODE_TOKEN).toBe('t');
  });
});

describe('server.ts', () => {
  let sim: StartedSim;
  let usage: UsageServer;
  let dir: string;
  let configFile: string;

  beforeAll(async () => {
    sim = await startSim();
    usage = await startUsageServer();
    dir = await mkdtemp(join(tmpdir(), 'dataplane-server-'));
    configFile = join(dir, 'config.json');
    await writeFile(configFile, JSON.stringify(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() })));
  });
  afterAll(async () => {
    await sim.sim.close();
    await usage.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('exits with a clear message on bad env', async () => {
    const child = spawn(process.execPath, [SERVER], { env: { PATH: process.env['PATH'] ?? '', PORT: '-1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(err).toContain('PORT');
    expect(err).toContain('CONFIG_FILE');
  });

  it('serves from CONFIG_FILE and flushes usage on SIGTERM', async () => {
    const child = spawn(process.execPath, [SERVER], {
      env: {
        PATH: process.env['PATH'] ?? '',
        PORT: '0',
        CONFIG_FILE: configFile,
        CONTROL_PLANE_URL: usage.url,
        NODE_TOKEN: 'node-token',
        USAGE_FLUSH_MS: '600000',
        // Its own spool: the default (.data/dataplane-usage-<PORT>) may hold records an earlier run left, replayed at start.
        USAGE_SPOOL_DIR: join(dir, 'spool'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    await waitFor(() => /dataplane listening on http:\/\/127\.0\.0\.1:\d+/.test(out));
    const base = /listening on (http:\/\/\S+)/.exec(out)![1]!;
    const res = await post(`${base}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), undefined, { 'x-request-id': 'server-flush-1' });
    expect(res.status).toBe(200);
    await res.text();
    expect(usage.records.some((r) => r.requestId.startsWith('server-flush-1.'))).toBe(false);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(0);
    expect(usage.records.some((r) => r.requestId.startsWith('server-flush-1.'))).toBe(true);
    expect(out).not.toContain('infk_');
  });
});
