import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '@infer/shared';
import { createUsageReporter, parseEnv } from '../src/index.ts';
import { NAME, SECRET_A, chatBody, deadUrl, fakeRecord, makeSnapshot, post, sendRequest, startSim, startUsageServer, waitFor } from './helpers.ts';
import type { StartedSim, UsageServer } from './helpers.ts';

const SERVER = fileURLToPath(new URL('../src/server.ts', import.meta.url));

/**
 * A control plane for one node: its config stream (refused with 401 while `refusing`), and usage and load-report
 * routes that take nothing (500, 404), so the node has problems to report.
 */
async function startControlPlane(snapshot: ConfigSnapshot, nodeToken: string) {
  const streams = new Set<ServerResponse>();
  const state = { refusing: false, refused: 0 };
  const server = createServer((req, res) => {
    req.resume();
    if (req.url !== '/internal/v1/config/stream') {
      res.writeHead(req.url === '/internal/v1/usage' ? 500 : 404).end();
      return;
    }
    if (state.refusing || req.headers.authorization !== `Bearer ${nodeToken}`) {
      state.refused++;
      res.writeHead(401).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`event: snapshot\nid: ${snapshot.version}\ndata: ${JSON.stringify(snapshot)}\n\n`);
    streams.add(res);
    res.on('close', () => streams.delete(res));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    /** The node credential revoked: open streams end, new ones get 401. */
    revoke() {
      state.refusing = true;
      for (const s of streams) s.destroy();
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** Polls an async condition (generous bound; not a timing assertion). */
async function until(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

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

  /** server.ts on `config` billing to the stand-in control plane, with its own spool (the default may hold an earlier run's records, replayed at start). */
  async function startNode(config: string, spool: string, env: Record<string, string> = {}) {
    const child = spawn(process.execPath, [SERVER], {
      env: {
        PATH: process.env['PATH'] ?? '',
        PORT: '0',
        CONFIG_FILE: config,
        CONTROL_PLANE_URL: usage.url,
        NODE_TOKEN: 'node-token',
        USAGE_FLUSH_MS: '600000',
        USAGE_SPOOL_DIR: join(dir, spool),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    await waitFor(() => /dataplane listening on http:\/\/127\.0\.0\.1:\d+/.test(out));
    return { child, base: /listening on (http:\/\/\S+)/.exec(out)![1]!, output: () => out };
  }

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
    const { child, base, output } = await startNode(configFile, 'spool');
    const res = await post(`${base}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), undefined, { 'x-request-id': 'server-flush-1' });
    expect(res.status).toBe(200);
    await res.text();
    expect(usage.records.some((r) => r.requestId.startsWith('server-flush-1.'))).toBe(false);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(0);
    expect(usage.records.some((r) => r.requestId.startsWith('server-flush-1.'))).toBe(true);
    expect(output()).not.toContain('infk_');
  });

  it('stops a stream that outlasts the drain time at SIGTERM with an error event, bills what the client got, and exits 0', async () => {
    // A runtime slow enough that the stream would run 60 s (600 tokens, 100 ms apart).
    const slow = await startSim({ itlMs: 100 });
    const slowConfig = join(dir, 'slow-config.json');
    await writeFile(slowConfig, JSON.stringify(makeSnapshot({ sim: slow.url, faulty: slow.url, dead: await deadUrl() })));
    const { child, base } = await startNode(slowConfig, 'drain-spool', { SHUTDOWN_DRAIN_MS: '1000' });
    try {
      const res = await post(`${base}/endpoints/v1/chat/completions`, chatBody({ model: NAME, stream: true, max_tokens: 600 }), undefined, {
        'x-request-id': 'server-drain-1',
      });
      expect(res.status).toBe(200);
      // And an answer still being generated (non-streamed) when the drain time ends.
      const waiting = post(`${base}/endpoints/v1/chat/completions`, chatBody({ model: NAME, max_tokens: 600 }), undefined, {
        'x-request-id': 'server-drain-2',
      });
      const reader = res.body!.getReader();
      let text = '';
      const tokens = () => (text.match(/"content":"[^"]/g) ?? []).length;
      while (tokens() < 3) text += Buffer.from((await reader.read()).value!).toString('utf8');
      child.kill('SIGTERM');
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString('utf8');
      }
      const [code] = (await once(child, 'exit')) as [number];
      expect(code).toBe(0);
      // The client was told why its stream ended, OpenAI-shaped, and the stream ended cleanly.
      expect(text).toContain('"code":"service_unavailable"');
      expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
      expect(tokens()).toBeLessThan(600);
      const rec = usage.records.find((r) => r.requestId.startsWith('server-drain-1.'));
      expect(rec).toMatchObject({ status: 503, estimated: true });
      expect(rec!.completionTokens).toBeGreaterThanOrEqual(tokens());
      expect(rec!.promptTokens).toBeGreaterThan(0);
      // The waiting one: a 503 to retry elsewhere, billed nothing (the node, not the caller, gave up).
      const stopped = await waiting;
      expect(stopped.status).toBe(503);
      expect(stopped.headers.get('retry-after')).toBe('1');
      expect(((await stopped.json()) as { error: { code: string } }).error.code).toBe('service_unavailable');
      expect(usage.records.find((r) => r.requestId.startsWith('server-drain-2.'))).toMatchObject({ status: 503, promptTokens: 0, completionTokens: 0 });
    } finally {
      child.kill('SIGKILL');
      await slow.sim.close();
    }
  });

  it.each([
    ['on', 'the node’s HTTP/1.1 front'],
    ['off', 'Node’s HTTP server'],
  ])('a stalled upload does not hold the exit past the drain time: its connection closes, the last flush runs, exit 0 (HTTP_FRONT=%s: %s)', async (front) => {
    // Fault QA finding: a request whose body stopped coming held the close until the forced exit (code 1), which
    // skipped the last usage flush: a request answered just before was left unbilled in the spool.
    const { child, base } = await startNode(configFile, `upload-spool-${front}`, { SHUTDOWN_DRAIN_MS: '500', HTTP_FRONT: front });
    try {
      const id = `server-upload-${front}`;
      const res = await post(`${base}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), undefined, { 'x-request-id': id });
      expect(res.status).toBe(200);
      await res.text();
      const { port } = new URL(base);
      const upload = connect(Number(port), '127.0.0.1');
      await once(upload, 'connect');
      const body = JSON.stringify({ model: NAME, messages: [{ role: 'user', content: 'a body that never ends' }] });
      upload.write(
        `POST /endpoints/v1/chat/completions HTTP/1.1\r\nhost: test\r\nauthorization: Bearer ${SECRET_A}\r\ncontent-type: application/json\r\n` +
          `content-length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
      );
      upload.on('data', () => undefined);
      upload.on('error', () => undefined); // the node may reset the connection it drops
      const uploadClosed = once(upload, 'close');
      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number];
      expect(code).toBe(0);
      await uploadClosed;
      expect(usage.records.some((r) => r.requestId.startsWith(`${id}.`))).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it("logs every line as the node's pino JSON, and fails closed while the control plane refuses its credential", async () => {
    const nodeToken = 'node-token-that-is-never-logged-4711';
    // Records an earlier run left in the spool: replayed at start.
    const spoolDir = join(dir, 'spool-refused');
    const earlier = createUsageReporter({ url: await deadUrl(), nodeToken, flushMs: 600_000, spoolDir });
    earlier.record(fakeRecord('left-by-an-earlier-run'));
    expect((await earlier.close()).remaining).toBe(1);
    const cp = await startControlPlane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), nodeToken);
    const child = spawn(process.execPath, [SERVER], {
      env: {
        PATH: process.env['PATH'] ?? '',
        PORT: '0',
        CONTROL_PLANE_URL: cp.url,
        NODE_TOKEN: nodeToken,
        USAGE_SPOOL_DIR: spoolDir,
        USAGE_FLUSH_MS: '50',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const logLines = (): Record<string, unknown>[] =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const logged = (msg: string): Record<string, unknown>[] => logLines().filter((l) => typeof l['msg'] === 'string' && l['msg'].startsWith(msg));
    try {
      await waitFor(() => /dataplane listening on http:\/\/127\.0\.0\.1:\d+/.test(out));
      const base = /listening on (http:\/\/\S+)/.exec(out)![1]!;
      const chat = () => post(`${base}/endpoints/v1/chat/completions`, chatBody({ model: NAME }));
      await until(async () => (await fetch(`${base}/readyz`)).status === 200);
      expect((await chat()).status).toBe(200);
      const routed = await sendRequest(base, '/endpoints/v1/chat/completions', {
        body: chatBody({ model: NAME }),
        chunked: true,
        headers: { 'x-request-id': 'srv-chunked' },
      });
      expect(routed.status).toBe(200);

      // The node's own warnings: usage the control plane does not take, load reports it does not take, the replay.
      await waitFor(() => logged('usage report problem').length > 0 && logged('control plane did not take a load report').length > 0);
      for (const msg of ['replaying usage records', 'usage report problem', 'control plane did not take a load report']) {
        const [line] = logged(msg);
        expect(line, msg).toMatchObject({ level: 40, time: expect.any(Number), pid: child.pid });
      }

      cp.revoke();
      await until(async () => (await fetch(`${base}/readyz`)).status === 503);
      const ready = (await (await fetch(`${base}/readyz`)).json()) as { reason: string };
      expect(ready.reason).toMatch(/refused this node's credential/);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      const refusedChat = await chat();
      expect(refusedChat.status).toBe(503);
      expect(((await refusedChat.json()) as { error: { code: string } }).error.code).toBe('service_unavailable');
      // Asked again and again; logged once, at error level.
      const seen = cp.state.refused;
      await waitFor(() => cp.state.refused >= seen + 2);
      const refusals = logged("the control plane refused this node's credential");
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toMatchObject({ level: 50, status: 401 });

      cp.state.refusing = false; // restored
      await until(async () => (await fetch(`${base}/readyz`)).status === 200);
      expect((await chat()).status).toBe(200);
      await waitFor(() => logged("the control plane accepts this node's credential again").length === 1);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await cp.close();
    }
    // One format: pino's JSON with a numeric level, each line naming its request at most once; never the credential.
    for (const line of out.split('\n').filter((l) => l !== '' && !l.startsWith('dataplane listening on '))) {
      expect(line.startsWith('{'), line).toBe(true);
      expect(typeof (JSON.parse(line) as { level: unknown }).level, line).toBe('number');
      expect(line.split('"reqId":').length, line).toBeLessThanOrEqual(2);
    }
    expect(logLines().some((l) => l['reqId'] === 'srv-chunked' && l['msg'] === 'request')).toBe(true);
    expect(out).not.toContain(nodeToken);
  }, 60_000);
});
