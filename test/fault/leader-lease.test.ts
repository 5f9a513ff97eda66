// Fault-QA findings (twentieth session): a PostgreSQL stall of about 2 s cost the autoscaler leader its leadership,
// and losing it stopped every replica it ran (each cold-started again); a leader frozen or cut off from the database
// kept the lock (its session never ended), so no other control plane took over. These tests freeze the database and
// the leader, on a private PostgreSQL.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdvisoryLeader, type LeaderElection } from '../../apps/admin-api/src/modules/deployments/autoscaler/leader-election.ts';
import { createDb, migrateToLatest } from '@infer/db';
import { createEntry, createTenant, issueAdminToken } from '@infer/admin-api';
import { freePort, startNode, waitReady, type Child } from '../../bench/processes.ts';
import { startPrivatePostgres, type PrivateService } from './private-services.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean, deadlineMs: number): Promise<void> {
  const end = performance.now() + deadlineMs;
  while (!check()) {
    if (performance.now() > end) throw new Error(`${what}: not within ${deadlineMs} ms`);
    await sleep(20);
  }
}

interface Watched {
  readonly election: LeaderElection;
  readonly events: string[];
}

function watched(pool: pg.Pool, leaseMs = 10_000): Watched {
  const events: string[] = [];
  const election = createAdvisoryLeader({ pool, retryMs: 200, leaseMs });
  election.start({ onAcquire: async () => void events.push('acquire'), onLose: async () => void events.push('lose') });
  return { election, events };
}

describe('autoscaler leadership under database and leader faults', () => {
  let db: PrivateService;
  const pools: pg.Pool[] = [];
  const elections: LeaderElection[] = [];
  const children: ChildProcess[] = [];
  const pool = (): pg.Pool => {
    const p = new pg.Pool({ connectionString: db.url, max: 2, connectionTimeoutMillis: 1000 });
    p.on('error', () => undefined); // connections the server ends (the tests make it) are replaced
    pools.push(p);
    return p;
  };

  beforeAll(async () => {
    db = await startPrivatePostgres();
  });
  afterAll(async () => {
    for (const c of children) {
      c.kill('SIGCONT');
      c.kill('SIGKILL');
    }
    db?.thaw();
    for (const e of elections) await e.close();
    for (const p of pools) await p.end().catch(() => undefined);
    await db?.close();
  });

  it('a database frozen for 4 s pauses the leader; it leads on after, and no other control plane took over', async () => {
    const a = watched(pool());
    elections.push(a.election);
    await until('a leads', () => a.election.isLeader(), 10_000);
    const b = watched(pool());
    elections.push(b.election);
    await sleep(500); // b tried the lock and found it held
    db.freeze();
    try {
      // Acting pauses once a ping goes unanswered (within the ping's 1 s timeout)...
      await until('a pauses', () => !a.election.isLeader(), 5_000);
      await sleep(4_000); // the stall: twice the ping timeout
    } finally {
      db.thaw();
    }
    // ...and resumes on the same session once the database answers: the lock was never let go.
    await until('a leads again', () => a.election.isLeader(), 10_000);
    expect(a.events).toEqual(['acquire']);
    expect(b.events).toEqual([]);
    expect(b.election.isLeader()).toBe(false);
    await a.election.close();
    await until('b takes over once a gives up', () => b.election.isLeader(), 10_000);
    await b.election.close();
  });

  it("a new leader's recovery longer than its lease does not let the session go idle and lose the lock", async () => {
    const events: string[] = [];
    let recovered = false;
    const slow = createAdvisoryLeader({ pool: pool(), retryMs: 200, leaseMs: 1000 });
    elections.push(slow);
    slow.start({
      onAcquire: async () => {
        events.push('acquire');
        await sleep(3_000); // a large install's recovery: three leases
        recovered = true;
      },
      onLose: async () => void events.push('lose'),
    });
    await until('recovered', () => recovered, 10_000);
    await until('leading after its recovery', () => slow.isLeader(), 2_000);
    expect(events).toEqual(['acquire']);
    await slow.close();
    expect(events).toEqual(['acquire', 'lose']);
  });

  it('a leader frozen past its lease loses the lock to another within the lease, and acts on nothing when thawed', async () => {
    const lines: { event?: string; leader?: boolean; gapMs?: number }[] = [];
    const child = spawn(process.execPath, [fileURLToPath(new URL('./leader-child.ts', import.meta.url))], {
      env: { PATH: process.env['PATH'] ?? '', DATABASE_URL: db.url, LEASE_MS: '2000' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    let buffered = '';
    child.stdout!.on('data', (c: Buffer) => {
      buffered += c.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as (typeof lines)[number]);
    });
    await until('the child leads', () => lines.some((l) => l.leader === true), 10_000);
    const other = watched(pool(), 2000);
    elections.push(other.election);
    await sleep(500);
    expect(other.election.isLeader()).toBe(false);

    child.kill('SIGSTOP');
    const frozenAt = performance.now();
    // The frozen leader's session goes idle; the server ends it after the lease and the other takes the lock.
    await until('the other takes over', () => other.election.isLeader(), 8_000);
    const tookOverMs = performance.now() - frozenAt;
    console.log(`leader frozen: another took over ${Math.round(tookOverMs)} ms after the freeze (lease 2000 ms from its last ping)`);

    const seen = lines.length;
    child.kill('SIGCONT');
    await until('the thawed leader learns it lost', () => lines.slice(seen).some((l) => l.event === 'lose'), 10_000);
    // The first thing the thawed process said of acting, before it learned anything: no.
    const first = lines.slice(seen).find((l) => l.leader !== undefined);
    expect(first).toMatchObject({ leader: false });
    expect(lines.slice(seen).some((l) => l.leader === true)).toBe(false);
    expect(other.election.isLeader()).toBe(true);
    child.kill('SIGKILL');
    await other.election.close(); // the lock is free for the next test
  });

  it("a database frozen for 4 s, then restarted, leaves the leader's replicas running: no cold start again", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leader-lease-'));
    const setup = await createDb({ databaseUrl: db.url });
    let cp: Child | undefined;
    try {
      await migrateToLatest(setup.db);
      const tenant = await createTenant(setup.db, { slug: 'lease', name: 'Lease' });
      await createEntry(setup.db, { name: 'Lease-Model', coldStartSeconds: 1, gpuCount: 1, offeredDedicated: true, published: true });
      const token = (await issueAdminToken(setup.db, { name: 'lease', tenantId: null })).secret;
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      cp = startNode('admin-api', fileURLToPath(new URL('../../apps/admin-api/src/server.ts', import.meta.url)), [], {
        DATABASE_URL: db.url,
        NODE_TOKEN: 'lease-test-node-token-0123456789',
        METRICS_TOKEN: 'lease-test-metrics-token-0123456789',
        ADMIN_HOST: '127.0.0.1',
        ADMIN_PORT: String(port),
        LOG_LEVEL: 'info',
        DATA_DIR: join(dir, 'admin'),
        LOCAL_COLD_START_CAP_MS: '1000',
      });
      let logged = '';
      cp.proc.stdout?.on('data', (c: Buffer) => (logged += c.toString('utf8')));
      cp.proc.stderr?.on('data', (c: Buffer) => (logged += c.toString('utf8')));
      await waitReady(cp, `${url}/readyz`, 30_000);
      const gql = async (query: string, variables: Record<string, unknown>) => {
        const res = await fetch(`${url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ query, variables }),
          signal: AbortSignal.timeout(10_000),
        });
        return (await res.json()) as { data?: Record<string, { id: string; state: string }>; errors?: unknown[] };
      };
      const deployed = await gql(
        'mutation($t: ID!) { deployEndpoint(tenantId: $t, endpointName: "Lease-Model", minReplicas: 1, maxReplicas: 1, provisioner: LOCAL) { id state } }',
        { t: tenant.id },
      );
      expect(deployed.errors).toBeUndefined();
      const deploymentId = deployed.data!['deployEndpoint']!.id;
      const replica = async () =>
        (await setup.db.selectFrom('deploymentReplicas').select(['id', 'pid', 'state']).where('deploymentId', '=', deploymentId).execute()).filter(
          (r) => r.state === 'ready',
        );
      const alive = (pid: number) => {
        try {
          return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
        } catch {
          return false;
        }
      };
      let ready: { id: string; pid: number | null }[] = [];
      const until2 = async (what: string, check: () => Promise<boolean>, ms: number) => {
        const end = performance.now() + ms;
        while (!(await check())) {
          if (performance.now() > end) throw new Error(`${what}: not within ${ms} ms\n${logged.split('\n').slice(-40).join('\n')}`);
          await sleep(100);
        }
      };
      await until2('one replica ready', async () => (ready = await replica()).length === 1, 30_000);
      const [{ id: replicaId, pid }] = ready as [{ id: string; pid: number }];
      expect(alive(pid)).toBe(true);
      const log = () => logged;

      db.freeze();
      try {
        await sleep(4_000);
      } finally {
        db.thaw();
      }
      await until2('leadership confirmed again', async () => log().includes('autoscaler leadership confirmed again'), 15_000);
      expect(log()).not.toContain('autoscaler leadership lost');
      expect(alive(pid)).toBe(true);

      // A restart ends every session: the lock is lost for real, and taken again within the grace.
      await db.restart();
      await until2('leadership lost and taken again', async () => log().split('autoscaler leadership acquired').length - 1 >= 2, 20_000);
      await until2('the replica still listed, ready', async () => (await replica()).some((r) => r.id === replicaId), 10_000);
      expect(alive(pid)).toBe(true);
      const after = await setup.db.selectFrom('deployments').select('state').where('id', '=', deploymentId).executeTakeFirstOrThrow();
      expect(after.state).toBe('running');
      expect((await replica()).map((r) => r.id)).toEqual([replicaId]);
    } finally {
      if (cp && !cp.exited()) {
        const exited = new Promise((r) => cp!.proc.once('exit', r));
        cp.proc.kill('SIGTERM');
        await exited;
      }
      await setup.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
