// `admin:create` run as an operator would: a real process against a fresh database (PostgreSQL when
// DATABASE_URL is set, else PGlite in a temp DATA_DIR), the password piped on stdin.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createDb, type Database } from '@infer/db';
import { createTestDb, testBackends } from '@infer/db/testing';
import { verifyCredentials } from '../src/modules/auth/auth.service.ts';

const CLI = fileURLToPath(new URL('../src/cli/create-admin.ts', import.meta.url));
const PASSWORD = 'correct-horse-battery-staple-42';

function run(args: readonly string[], env: Record<string, string>, stdin: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.on('exit', (code) => resolve({ code, out }));
    child.stdin.end(stdin);
  });
}

describe.each(testBackends())('admin:create on %s', (kind) => {
  const dir = mkdtempSync(join(tmpdir(), 'infer-admin-create-'));
  let env: Record<string, string>;
  let open: () => Promise<Database>;
  const closers: (() => Promise<void>)[] = [];

  afterAll(async () => {
    for (const c of closers.reverse()) await c();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'creates a platform admin on a fresh database without printing the password, audited, and refuses a second with the same email',
    { timeout: 120_000 },
    async () => {
      if (kind === 'postgres') {
        // A fresh migrated database of its own; the CLI opens it by URL, as on a real deployment.
        const fresh = await createTestDb('postgres');
        closers.push(() => fresh.close());
        env = { DATABASE_URL: fresh.url! };
        open = async () => fresh;
      } else {
        env = { DATA_DIR: dir };
        // PGlite admits one process at a time: open it only after the CLI has exited.
        open = async () => {
          const d = await createDb({ dataDir: join(dir, 'pglite') });
          closers.push(() => d.close());
          return d;
        };
      }

      const created = await run(['--email', 'Ops@Example.com', '--name', 'Ops', '--password-stdin'], env, `${PASSWORD}\n`);
      expect(created.code, created.out).toBe(0);
      expect(created.out).toMatch(/created platform admin ops@example\.com/);
      expect(created.out).not.toContain(PASSWORD);

      const again = await run(['--email', 'ops@example.com', '--password-stdin'], env, 'another-password-1234\n');
      expect(again.code).toBe(1);
      expect(again.out).toMatch(/already exists/);

      const short = await run(['--email', 'short@example.com'], { ...env, ADMIN_PASSWORD: 'short' }, '');
      expect(short.code).toBe(1);
      expect(short.out).toMatch(/at least 8 characters/);
      expect(short.out).not.toContain('short@example.com (');

      const none = await run(['--email', 'nopass@example.com'], env, '');
      expect(none.code).toBe(2);
      expect(none.out).toMatch(/no password/);

      if (kind === 'pglite') {
        // A control plane (here: this test process, alive) has the embedded database open: refused, nothing written.
        const lock = join(dir, 'pglite.lock');
        writeFileSync(lock, String(process.pid));
        const busy = await run(['--email', 'busy@example.com', '--password-stdin'], env, `${PASSWORD}\n`);
        rmSync(lock);
        expect(busy.code).toBe(1);
        expect(busy.out).toMatch(new RegExp(`pglite is open in process ${process.pid} \\(a running control plane or pnpm start\\): stop it first`));
        expect(busy.out).not.toMatch(/\n\s+at /);
      }

      const database = await open();
      expect(await verifyCredentials(database.db, 'busy@example.com', PASSWORD)).toBeNull();
      const user = await verifyCredentials(database.db, 'ops@example.com', PASSWORD);
      expect(user?.isPlatformAdmin).toBe(true);
      expect(user?.displayName).toBe('Ops');
      const audit = await database.db.selectFrom('auditLog').select(['action', 'targetId', 'detail']).where('action', '=', 'platform_admin.create').execute();
      expect(audit).toEqual([{ action: 'platform_admin.create', targetId: user!.id, detail: { email: 'ops@example.com', via: 'cli' } }]);
      expect(JSON.stringify(audit)).not.toContain(PASSWORD);
      const users = await database.db.selectFrom('users').select('email').execute();
      expect(users.map((u) => u.email)).toEqual(['ops@example.com']);
    },
  );
});
