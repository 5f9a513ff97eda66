import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyDeltas, hashSecret } from '@infer/shared';
import type { ConfigDelta, ConfigSnapshot } from '@infer/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConfigClient, createConfigStore } from '../src/index.ts';
import type { ConfigClient } from '../src/index.ts';
import { NAME, SECRET_A, chatBody, deadUrl, makeSnapshot, memorySink, post, startDataplane, startSim, waitFor } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

const NODE_TOKEN = 'node-token-for-tests';

/** A tiny control plane: SSE snapshot + deltas with ids, resumes from Last-Event-ID. */
async function startConfigServer(initial: ConfigSnapshot, port = 0) {
  let snapshot = initial;
  const log: ConfigDelta[] = [];
  const clients = new Set<ServerResponse>();
  const lastEventIds: (string | null)[] = [];
  // A status (401, 403) the stream answers every node with while set: the node credential revoked.
  let refusing: number | null = null;
  let refused = 0;
  const server: Server = createServer((req, res) => {
    if (req.url === '/internal/v1/config/stream' && refusing !== null) {
      refused++;
      res.writeHead(refusing).end();
      return;
    }
    if (req.url !== '/internal/v1/config/stream' || req.headers.authorization !== `Bearer ${NODE_TOKEN}`) {
      res.writeHead(req.url === '/internal/v1/config/stream' ? 401 : 404).end();
      return;
    }
    const last = req.headers['last-event-id'];
    lastEventIds.push(typeof last === 'string' ? last : null);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('retry: 100\n: hello\n\n');
    const since = typeof last === 'string' ? Number(last) : Number.NaN;
    const missed = log.filter((d) => d.version > since);
    // Resume from the log when it covers the gap, else send a full snapshot.
    if (Number.isFinite(since) && since >= initial.version && since <= snapshot.version) {
      for (const d of missed) res.write(`event: delta\nid: ${d.version}\ndata: ${JSON.stringify(d)}\n\n`);
    } else {
      res.write(`event: snapshot\nid: ${snapshot.version}\ndata: ${JSON.stringify(snapshot)}\n\n`);
    }
    clients.add(res);
    res.on('close', () => clients.delete(res));
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    lastEventIds,
    get snapshot() {
      return snapshot;
    },
    /** Sends a delta to every node, split across two writes to exercise reassembly. */
    send(delta: ConfigDelta) {
      snapshot = applyDeltas(snapshot, [delta]);
      log.push(delta);
      const text = `event: delta\nid: ${delta.version}\ndata: ${JSON.stringify(delta)}\n\n`;
      for (const c of clients) {
        c.write(text.slice(0, 17));
        c.write(text.slice(17));
      }
    },
    /** Records a delta without sending it (it happened while nodes were disconnected). */
    record(delta: ConfigDelta) {
      snapshot = applyDeltas(snapshot, [delta]);
      log.push(delta);
    },
    ping() {
      for (const c of clients) c.write(': ping\n\n');
    },
    dropConnections() {
      for (const c of clients) c.destroy();
    },
    clientCount: () => clients.size,
    /** Refuses the node credential with `status` from now on, ending the open streams (as a revoke does); null: accepts it again. */
    refuse(status: number | null) {
      refusing = status;
      if (status !== null) for (const c of clients) c.destroy();
    },
    refusedCount: () => refused,
    close: () =>
      new Promise<void>((r) => {
        for (const c of clients) c.destroy();
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

const newKey = (id: string, secret: string, version: number): ConfigDelta => ({
  version,
  kind: 'key',
  id,
  op: 'upsert',
  value: { id, tenantId: 't-a', hash: hashSecret(secret), prefix: secret.slice(0, 12), expiresAt: null, rpmLimit: null, tpmLimit: null },
});

let sim: StartedSim;
let dir: string;
let base: ConfigSnapshot;

beforeAll(async () => {
  sim = await startSim();
  dir = await mkdtemp(join(tmpdir(), 'dataplane-config-'));
  base = makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }, 10);
});
afterAll(async () => {
  await sim.sim.close();
  await rm(dir, { recursive: true, force: true });
});

describe('config client', () => {
  let cp: Awaited<ReturnType<typeof startConfigServer>>;
  let client: ConfigClient;
  let dp: StartedApp;
  const errors: unknown[] = [];
  const refusals: number[] = [];
  let acceptances = 0;
  const snapshotFile = () => join(dir, 'snapshot.json');

  beforeAll(async () => {
    cp = await startConfigServer(base);
    const store = createConfigStore();
    client = createConfigClient({
      url: cp.url,
      nodeToken: NODE_TOKEN,
      store,
      snapshotFile: snapshotFile(),
      maxBackoffMs: 300,
      onError: (e) => void errors.push(e),
      onRefused: (status) => void refusals.push(status),
      onAccepted: () => void acceptances++,
    });
    dp = await startDataplane(null, memorySink(), { store });
    expect((await fetch(`${dp.url}/readyz`)).status).toBe(503);
    client.start();
  });
  afterAll(async () => {
    await client.close();
    await dp.app.close();
    await cp.close();
  });

  const chat = (key: string) => post(`${dp.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), key);

  it('loads the snapshot, then applies deltas; a deleted key is refused at once', async () => {
    await waitFor(() => client.version === 10);
    expect((await fetch(`${dp.url}/readyz`)).status).toBe(200);
    expect((await chat(SECRET_A)).status).toBe(200);

    const secret = 'infk_added_by_delta_000000000000000';
    expect((await chat(secret)).status).toBe(401);
    cp.send(newKey('k-new', secret, 11));
    await waitFor(() => client.version === 11);
    expect((await chat(secret)).status).toBe(200);

    cp.send({ version: 12, kind: 'key', id: 'k-a', op: 'delete', value: null });
    await waitFor(() => client.version === 12);
    const res = await chat(SECRET_A);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    cp.ping();
  });

  it('reconnects with Last-Event-ID after the server drops the stream and catches up', async () => {
    const before = cp.lastEventIds.length;
    cp.record(newKey('k-missed', 'infk_missed_while_away_0000000000000', 13));
    cp.dropConnections();
    await waitFor(() => client.version === 13);
    expect(cp.lastEventIds.length).toBe(before + 1);
    expect(cp.lastEventIds.at(-1)).toBe('12');
    expect((await chat('infk_missed_while_away_0000000000000')).status).toBe(200);
  });

  it('keeps serving the last snapshot while the control plane is down, and reconnects when it is back', async () => {
    const port = cp.port;
    await cp.close();
    await waitFor(() => !client.connected);
    for (let i = 0; i < 3; i++) expect((await chat('infk_missed_while_away_0000000000000')).status).toBe(200);
    expect((await fetch(`${dp.url}/readyz`)).status).toBe(200);
    // Back on the same address, with a change made meanwhile.
    const snap = applyDeltas(cp.snapshot, [newKey('k-late', 'infk_added_while_down_00000000000000', 14)]);
    cp = await startConfigServer(snap, port);
    await waitFor(() => client.version === 14, 15_000);
    expect((await chat('infk_added_while_down_00000000000000')).status).toBe(200);
    expect(errors.length).toBeGreaterThan(0);
  });

  it('fails closed while the control plane refuses the node credential, and serves again once it accepts it', async () => {
    const key = 'infk_added_while_down_00000000000000';
    expect((await chat(key)).status).toBe(200);
    expect(existsSync(snapshotFile())).toBe(true);
    cp.refuse(401);
    await waitFor(() => refusals.length === 1);
    const errorsBefore = errors.length; // the stream the refusal ended is one
    // Nor may a restart serve from the saved snapshot: it is gone.
    await waitFor(() => !existsSync(snapshotFile()));

    const ready = await fetch(`${dp.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { reason: string }).reason).toMatch(/refused this node's credential \(HTTP 401\)/);
    expect((await fetch(`${dp.url}/healthz`)).status).toBe(200); // liveness: nothing to restart
    // Every inference request, whatever its key and whichever way it comes in (fast path, Fastify's routes).
    const answers = [
      await chat(key),
      await chat('infk_not_a_key_at_all_000000000000000'),
      await fetch(`${dp.url}/endpoints/v1/models`, { headers: { authorization: `Bearer ${key}` } }),
      await fetch(`${dp.url}/endpoints/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        // No Content-Length: Fastify's route, not the fast path.
        body: new Blob([JSON.stringify(chatBody({ model: NAME }))]).stream(),
        duplex: 'half',
      } as RequestInit),
    ];
    for (const res of answers) {
      expect(res.status).toBe(503);
      const { error } = (await res.json()) as { error: { code: string; type: string; message: string } };
      expect(error).toMatchObject({ code: 'service_unavailable', type: 'api_error' });
      expect(error.message).toMatch(/credential was refused by the control plane/);
    }
    // The client keeps asking; the refusal is reported once, not as a connection problem per attempt.
    const seen = cp.refusedCount();
    await waitFor(() => cp.refusedCount() >= seen + 2);
    expect(refusals).toEqual([401]);
    expect(errors.length).toBe(errorsBefore);
    expect(acceptances).toBe(0);

    cp.refuse(null); // the credential restored (or rotated)
    await waitFor(() => acceptances === 1);
    expect((await fetch(`${dp.url}/readyz`)).status).toBe(200);
    expect((await chat(key)).status).toBe(200);

    // A 403 is as definitive as a 401.
    cp.refuse(403);
    await waitFor(() => refusals.length === 2);
    expect(refusals).toEqual([401, 403]);
    expect((await chat(key)).status).toBe(503);
    cp.refuse(null);
    await waitFor(() => acceptances === 2);
    expect((await chat(key)).status).toBe(200);
  }, 20_000);

  it('persists the snapshot (0600) and a fresh node serves from it without the control plane', async () => {
    await waitFor(() => {
      try {
        return (JSON.parse(readFileSync(snapshotFile(), 'utf8')) as ConfigSnapshot).version === 14;
      } catch {
        return false;
      }
    });
    const mode = (await stat(snapshotFile())).mode & 0o777;
    expect(mode).toBe(0o600);
    expect(JSON.parse(await readFile(snapshotFile(), 'utf8')).version).toBe(14);

    const store = createConfigStore();
    const offline = createConfigClient({ url: await deadUrl(), nodeToken: NODE_TOKEN, store, snapshotFile: snapshotFile() });
    offline.start();
    const node = await startDataplane(null, memorySink(), { store });
    try {
      expect(store.version).toBe(14);
      expect((await fetch(`${node.url}/readyz`)).status).toBe(200);
      const res = await post(`${node.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME }), 'infk_added_while_down_00000000000000');
      expect(res.status).toBe(200);
    } finally {
      await offline.close();
      await node.app.close();
    }
  });
});
