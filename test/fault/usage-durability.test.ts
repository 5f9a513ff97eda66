/**
 * Reliability findings 1 and 2 (issue 9): usage survives `kill -9` of a data-plane node, and a SIGTERM
 * while the control plane is down. Real processes: the control plane (apps/admin-api/src/server.ts on a
 * fresh PostgreSQL database) and the data-plane node (apps/dataplane/src/server.ts, durable spool in a
 * temp dir); the runtime simulator and the load generator run in this process.
 *
 * Every client request carries its own x-request-id, which the node folds into the usage record's id
 * (`<x-request-id>.<uuid>`), so each request the client saw succeed is matched to its billing rows.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { freePort } from './private-services.ts';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addUpstream, createApiKey, createEntry, createTenant } from '@infer/admin-api';
import { createTestDb, type TestDatabase } from '@infer/db/testing';
import { createRuntimeSim, type RuntimeSim } from '@infer/runtime-sim';

const ROOT = resolve(import.meta.dirname, '../..');
const NODE_TOKEN = 'fault-test-node-token-0123456789';

interface Proc {
  readonly child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function startNode(script: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [join(ROOT, script)], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (b: Buffer): void => {
    out = (out + b.toString('utf8')).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 30_000, proc?: Proc): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await sleep(50);
  }
  throw new Error(`${what} not reached within ${timeoutMs} ms${proc ? `\n${proc.output()}` : ''}`);
}

const answers = (url: string) => async () => (await fetch(url)).status === 200;

describe('usage durability on the data-plane node (real processes)', () => {
  let database: TestDatabase;
  let sim: RuntimeSim;
  let dir: string;
  let secret: string;
  let adminPort: number;
  let nodePort: number;
  let admin: Proc | null = null;
  let node: Proc | null = null;

  const startAdmin = async (): Promise<void> => {
    admin = startNode('apps/admin-api/src/server.ts', {
      DATABASE_URL: database.url!,
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      NODE_TOKEN,
      DATA_DIR: join(dir, 'admin'),
      LOG_LEVEL: 'warn',
      OUTBOX_PRUNE_INTERVAL_S: '0',
      SECRETS_ENCRYPTION_KEY: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    });
    await waitUntil(answers(`http://127.0.0.1:${adminPort}/healthz`), 'control plane up', 30_000, admin);
  };
  const startDataplane = async (flushMs = 200): Promise<void> => {
    node = startNode('apps/dataplane/src/server.ts', {
      HOST: '127.0.0.1',
      PORT: String(nodePort),
      CONTROL_PLANE_URL: `http://127.0.0.1:${adminPort}`,
      NODE_TOKEN,
      USAGE_SPOOL_DIR: join(dir, 'spool'),
      USAGE_FLUSH_MS: String(flushMs),
      LOG_LEVEL: 'warn',
      METRICS_PORT: '0',
      // The shared test machine is slow: let requests queue rather than be refused, the point is billing.
      REPLICA_BASE_CONCURRENCY: '512',
      QUEUE_MAX: '4096',
    });
    await waitUntil(answers(`http://127.0.0.1:${nodePort}/readyz`), 'data-plane node ready', 30_000, node);
  };
  const stop = async (p: Proc | null, signal: NodeJS.Signals): Promise<void> => {
    if (p === null || p.child.exitCode !== null || p.child.signalCode !== null) return;
    p.child.kill(signal);
    await p.exited;
  };

  beforeAll(async () => {
    process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/postgres';
    database = await createTestDb('postgres');
    sim = createRuntimeSim({ models: ['org/served-model'], ttftMs: 5, itlMs: 2 });
    const simUrl = (await sim.listen(0)).url;
    const db = database.db;
    const tenant = await createTenant(db, { slug: 'acme', name: 'Acme' });
    const entry = await createEntry(db, { name: 'Model-One', provider: 'org', offeredShared: true, published: true, priceInputPerM: 1, priceOutputPerM: 2 });
    await addUpstream(db, { entryId: entry.id, url: simUrl, kind: 'sim', servedModel: 'org/served-model' });
    secret = (await createApiKey(db, { tenantId: tenant.id, name: 'fault' })).secret;
    dir = mkdtempSync(join(tmpdir(), 'usage-durability-'));
    adminPort = await freePort();
    nodePort = await freePort();
    await startAdmin();
    await startDataplane();
  });

  afterAll(async () => {
    await stop(node, 'SIGKILL');
    await stop(admin, 'SIGTERM');
    await sim?.close();
    await database?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** One chat call; true when the client got a whole successful answer. */
  const call = async (id: string, stream: boolean): Promise<boolean> => {
    try {
      const res = await fetch(`http://127.0.0.1:${nodePort}/endpoints/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-request-id': id },
        body: JSON.stringify({ model: 'Model-One', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 6, stream }),
      });
      const text = await res.text();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status !== 200) {
        lastError = text.slice(0, 300);
        return false;
      }
      return stream ? text.includes('data: [DONE]') && !text.includes('"error"') : text.includes('"choices"');
    } catch (err) {
      lastError = String((err as { cause?: unknown }).cause ?? err);
      statuses.set(0, (statuses.get(0) ?? 0) + 1);
      return false;
    }
  };
  const statuses = new Map<number, number>();
  let lastError = '';

  /**
   * Open-loop load at `rate` req/s until `done(elapsed, successes so far)` says so (a slow machine gets more time, not
   * fewer successes; 60 s at most); returns the ids the client saw succeed and how many were sent.
   */
  const drive = (prefix: string, rate: number, until: (elapsed: number, okSoFar: number) => boolean, firstId = 0) => {
    const ok = new Set<string>();
    const pending: Promise<void>[] = [];
    let sent = firstId;
    const done = (async () => {
      const start = performance.now();
      for (let elapsed = 0; !until(elapsed, ok.size); elapsed = performance.now() - start) {
        if (elapsed > 60_000) throw new Error(`load '${prefix}': ${ok.size} successes in 60 s; statuses ${JSON.stringify([...statuses])} ${lastError}`);
        const due = firstId + Math.floor(((performance.now() - start) / 1000) * rate);
        while (sent < due) {
          const id = `${prefix}-${sent}`;
          const stream = sent % 2 === 0;
          sent++;
          pending.push(call(id, stream).then((good) => void (good && ok.add(id))));
        }
        await sleep(5);
      }
      await Promise.all(pending);
      return { ok, sent };
    })();
    return done;
  };

  const billedByRequest = async (prefix: string): Promise<Map<string, number>> => {
    const rows = await database.db.selectFrom('usageRecords').select('requestId').where('requestId', 'like', `${prefix}-%`).where('status', '=', 200).execute();
    const counts = new Map<string, number>();
    for (const r of rows) {
      const id = r.requestId.slice(0, r.requestId.indexOf('.'));
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    return counts;
  };

  it('kill -9 of a node under load: every success the client saw is billed exactly once after restart', async () => {
    // Load, kill -9 in the middle of it (requests in flight die with the node), restart on the same spool, load again.
    // The node reports nothing before it dies (flush interval of a minute): every success before the kill
    // can only be billed from its spool.
    await stop(node, 'SIGTERM');
    await startDataplane(60_000);
    // Killed once at least 1.5 s and 20 successes have passed, in the middle of the load (which goes on for 1 s more).
    let killed: Promise<void> | null = null;
    let killedAt = 0;
    const before = await drive('k9', 120, (elapsed, okSoFar) => {
      if (killed === null && elapsed >= 1500 && okSoFar >= 20) {
        killed = stop(node, 'SIGKILL');
        killedAt = elapsed;
      }
      return killed !== null && elapsed >= killedAt + 1000;
    });
    await killed;
    await startDataplane(); // what the dead process spooled is replayed
    const replayed = Number(
      /"records":(\d+)[^\n]*replaying|replaying[^\n]*"records":(\d+)/
        .exec(node!.output())
        ?.slice(1)
        .find((x) => x !== undefined) ?? '0',
    );
    const statusesBefore = JSON.stringify([...statuses]);
    const after = await drive('k9', 120, (elapsed, okSoFar) => elapsed >= 1500 && okSoFar >= 20, before.sent);
    console.log(`before restart ${statusesBefore}, after ${JSON.stringify([...statuses])}`);
    const ok = new Set([...before.ok, ...after.ok]);
    const sent = after.sent;
    expect(before.ok.size, `statuses ${JSON.stringify([...statuses])} ${lastError}`).toBeGreaterThan(5);
    expect(after.ok.size, `statuses ${JSON.stringify([...statuses])} ${lastError}`).toBeGreaterThan(5);
    expect(replayed).toBeGreaterThanOrEqual(before.ok.size);

    let billed = new Map<string, number>();
    await waitUntil(
      async () => {
        billed = await billedByRequest('k9');
        return [...ok].every((id) => billed.has(id));
      },
      'every success billed',
      30_000,
    );
    const lost = [...ok].filter((id) => !billed.has(id));
    const duplicated = [...billed.values()].filter((n) => n > 1).length;
    const billedNotSeen = [...billed.keys()].filter((id) => !ok.has(id)).length;
    console.log(
      `kill -9 under load: replayed from the dead node's spool ${replayed}, statuses ${JSON.stringify([...statuses])}, sent ${sent}, client successes ${ok.size}, billed ${billed.size}, lost ${lost.length}, duplicated ${duplicated}, billed but failed at the client ${billedNotSeen}`,
    );
    expect(lost).toEqual([]);
    expect(duplicated).toBe(0);
  }, 120_000);

  it('SIGTERM of a node while the control plane is down: the records are spooled, logged, and arrive after both restart', async () => {
    await stop(admin, 'SIGTERM');
    const { ok, sent } = await drive('down', 50, (elapsed, okSoFar) => elapsed >= 1500 && okSoFar >= 10);
    expect(ok.size, `statuses ${JSON.stringify([...statuses])} ${lastError}`).toBeGreaterThan(sent / 4); // served from the node's config
    const nodeBefore = node!;
    await stop(node, 'SIGTERM');
    expect(await nodeBefore.exited).toBe(0);
    expect(nodeBefore.output()).toMatch(/usage records not yet accepted by the control plane stay spooled[^\n]*|"remaining":\d+/);
    const remaining = Number(/"remaining":(\d+)/.exec(nodeBefore.output())?.[1] ?? '0');
    expect(remaining).toBeGreaterThanOrEqual(ok.size);

    await startAdmin();
    await startDataplane();
    let billed = new Map<string, number>();
    await waitUntil(
      async () => {
        billed = await billedByRequest('down');
        return [...ok].every((id) => billed.has(id));
      },
      'every spooled record delivered',
      30_000,
    );
    const duplicated = [...billed.values()].filter((n) => n > 1).length;
    console.log(
      `SIGTERM with the control plane down: client successes ${ok.size}, spooled at shutdown ${remaining}, billed after restart ${billed.size}, duplicated ${duplicated}`,
    );
    expect([...ok].filter((id) => !billed.has(id))).toEqual([]);
    expect(duplicated).toBe(0);
  }, 120_000);
});
