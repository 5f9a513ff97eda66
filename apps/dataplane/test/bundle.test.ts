// The data plane runs in production from the rolldown bundle (apps/dataplane/build.ts -> dist/server.js), not
// from its .ts sources: the bundle, started as a real process with the production Node flags, serves a JSON and
// a streamed answer, and loads the npm packages `src/` requires lazily at run time (ioredis with REDIS_URL,
// gpt-tokenizer for a cut stream's prompt) from its own folder.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDataplane } from '../build.ts';
import { DATAPLANE_NODE_ENV, DATAPLANE_NODE_FLAGS } from '../src/node-flags.ts';
import { countPromptTokens } from '../src/usage/prompt-tokens.ts';
import { NAME, SERVED, chatBody, deadUrl, makeSnapshot, post, startSim, startUsageServer, waitFor } from './helpers.ts';
import type { StartedSim, UsageServer } from './helpers.ts';

// CI starts Redis on 127.0.0.1:6379 (.ci/run), as for limits-redis.test.ts.
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const PREFIX = `test:bundle:${process.pid}:${Date.now()}`;
const PACKAGE = join(import.meta.dirname, '..');
const CHAT = '/endpoints/v1/chat/completions';

describe('the bundled data plane (dist/server.js)', () => {
  let sim: StartedSim;
  let usage: UsageServer;
  let dir: string;
  let bundle: string;
  let child: ChildProcess;
  let out = '';
  let base: string;

  beforeAll(async () => {
    sim = await startSim();
    usage = await startUsageServer();
    // Inside the package (dist/ is git-ignored): the bundle finds its npm packages in the package's node_modules.
    mkdirSync(join(PACKAGE, 'dist'), { recursive: true });
    dir = await mkdtemp(join(PACKAGE, 'dist', 'bundle-test-'));
    bundle = await buildDataplane(dir);
    const snapshot = makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() });
    // An RPM limit on key A, so that its requests go through the Redis limiter.
    snapshot.keys.find((k) => k.id === 'k-a')!.rpmLimit = 1000;
    const configFile = join(dir, 'config.json');
    await writeFile(configFile, JSON.stringify(snapshot));
    child = spawn(process.execPath, [...DATAPLANE_NODE_FLAGS, bundle], {
      env: {
        PATH: process.env['PATH'] ?? '',
        ...DATAPLANE_NODE_ENV,
        PORT: '0',
        METRICS_PORT: '0',
        CONFIG_FILE: configFile,
        CONTROL_PLANE_URL: usage.url,
        NODE_TOKEN: 'node-token',
        USAGE_FLUSH_MS: '50',
        USAGE_SPOOL_DIR: join(dir, 'usage-spool'),
        REDIS_URL,
        REDIS_KEY_PREFIX: PREFIX,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    await waitFor(() => /dataplane listening on http:\/\/127\.0\.0\.1:\d+/.test(out) || child.exitCode !== null, 30_000);
    expect(child.exitCode, out).toBeNull();
    base = /listening on (http:\/\/\S+)/.exec(out)![1]!;
    let ready = false;
    const deadline = Date.now() + 30_000;
    while (!ready && Date.now() < deadline) {
      ready = (await fetch(`${base}/readyz`)).status === 200;
      if (!ready) await new Promise((r) => setTimeout(r, 50));
    }
    expect(ready, out).toBe(true);
  });

  afterAll(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    const admin = new Redis(REDIS_URL);
    let cursor = '0';
    do {
      const [next, found] = await admin.scan(cursor, 'MATCH', `${PREFIX}:*`, 'COUNT', 500);
      if (found.length > 0) await admin.del(...found);
      cursor = next;
    } while (cursor !== '0');
    admin.disconnect();
    await sim?.sim.close();
    await usage?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('is one ESM file with the workspace code inside: only node: built-ins and npm packages are imported', async () => {
    const code = await readFile(bundle, 'utf8');
    const imported = [...code.matchAll(/^import [^'"]*["']([^'"]+)["'];?$/gm)].map((m) => m[1]!);
    expect(imported.length).toBeGreaterThan(0);
    for (const id of imported) expect(id).toMatch(/^(node:|[a-z@][^/]*)/);
    expect(imported.filter((id) => id.startsWith('@infer/') || id.startsWith('.') || id.endsWith('.ts'))).toEqual([]);
  });

  it('answers a JSON chat request', async () => {
    const res = await post(base + CHAT, chatBody({ model: NAME }));
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.object).toBe('chat.completion');
    expect(body.model).toBe(NAME);
    expect(typeof body.choices[0].message.content).toBe('string');
    expect(body.choices[0].message.content.length).toBeGreaterThan(0);
    expect(body.usage.prompt_tokens).toBeGreaterThan(0);
  });

  it('streams a chat answer as SSE', async () => {
    const res = await post(base + CHAT, chatBody({ model: NAME, stream: true }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    const events = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => e.slice('data: '.length));
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as any);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === NAME)).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('').length).toBeGreaterThan(0);
  });

  it('loads ioredis at run time and keeps the rate windows in Redis', async () => {
    const res = await post(base + CHAT, chatBody({ model: NAME }));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit-requests')).toBe('1000');
    await res.text();
    const admin = new Redis(REDIS_URL);
    try {
      let keys: string[] = [];
      const deadline = Date.now() + 10_000;
      while (keys.length === 0 && Date.now() < deadline) {
        keys = await admin.keys(`${PREFIX}:*`);
        if (keys.length === 0) await new Promise((r) => setTimeout(r, 50));
      }
      expect(keys.length).toBeGreaterThan(0);
    } finally {
      admin.disconnect();
    }
    expect(out).not.toMatch(/redis rate-limit store unreachable/);
  });

  it('loads gpt-tokenizer at run time to count the prompt of a cut stream', async () => {
    sim.sim.setFaults({ cutAfterTokens: 2 });
    try {
      const body = chatBody({ model: NAME, stream: true, max_tokens: 20 });
      const res = await post(base + CHAT, body, undefined, { 'x-request-id': 'bundle-cut' });
      await res.text();
      await waitFor(() => usage.records.some((r) => r.requestId.startsWith('bundle-cut.')));
      const record = usage.records.find((r) => r.requestId.startsWith('bundle-cut.'))!;
      expect(record.estimated).toBe(true);
      expect(record.promptTokens).toBe(countPromptTokens({ ...body, model: SERVED }));
    } finally {
      sim.sim.setFaults({});
    }
    expect(child.exitCode).toBeNull();
  });
});
