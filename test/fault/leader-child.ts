// A control-plane leader in a process of its own, for leader-lease.test.ts to freeze (SIGSTOP) and thaw: it holds
// the advisory lock on DATABASE_URL with a LEASE_MS lease, and prints one JSON line per event (acquire, lose) and,
// every 20 ms, whether it would act now ({"leader": true|false}) when that changed or when it was the first line after
// a gap (a freeze).
import pg from 'pg';
import { createAdvisoryLeader } from '../../apps/admin-api/src/modules/deployments/autoscaler/leader-election.ts';

const pool = new pg.Pool({ connectionString: process.env['DATABASE_URL'], max: 2 });
const election = createAdvisoryLeader({ pool, retryMs: 200, leaseMs: Number(process.env['LEASE_MS'] ?? 2000) });
const say = (o: object): void => void process.stdout.write(`${JSON.stringify(o)}\n`);
election.start({
  onAcquire: async () => say({ event: 'acquire' }),
  onLose: async () => say({ event: 'lose' }),
});
let last: boolean | null = null;
let lastAt = performance.now();
setInterval(() => {
  const now = performance.now();
  const leader = election.isLeader();
  if (leader !== last || now - lastAt > 500) say({ leader, gapMs: Math.round(now - lastAt) });
  last = leader;
  lastAt = now;
}, 20);
