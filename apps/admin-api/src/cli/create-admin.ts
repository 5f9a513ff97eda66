// `pnpm --filter @infer/admin-api admin:create --email ops@example.com [--name "Ops"] [--password-stdin]`
// Creates a platform admin in the database the control plane uses (DATABASE_URL, or PGlite in DATA_DIR
// when no control plane holds it open). The password comes from stdin (--password-stdin), ADMIN_PASSWORD,
// or an interactive prompt that does not echo; it is never printed or logged.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createDb, DataDirInUseError, migrateToLatest } from '@infer/db';
import { ServiceError } from '../errors.ts';
import { createPlatformAdmin } from '../modules/auth/platform-admin.ts';
import { loadCreateAdminEnv } from './create-admin-env.ts';

const USAGE = 'usage: admin:create --email EMAIL [--name NAME] [--password-stdin]   (or ADMIN_PASSWORD, or a prompt on a terminal)';

function fail(message: string, code = 2): never {
  process.stderr.write(`admin:create: ${message}\n`);
  process.exit(code);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  // One trailing newline is the terminator `echo` or a file adds, not part of the password.
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** Reads one line from the terminal without echoing it. */
function promptHidden(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const stdin = process.stdin;
    process.stderr.write(question);
    stdin.setRawMode(true);
    stdin.resume();
    stdin.setEncoding('utf8');
    let value = '';
    const done = (err?: Error): void => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off('data', onData);
      process.stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chars: string): void => {
      for (const ch of chars) {
        if (ch === '\r' || ch === '\n') return done();
        if (ch === '\u0003') return done(new Error('cancelled'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.on('data', onData);
  });
}

let args;
try {
  args = parseArgs({
    options: { email: { type: 'string' }, name: { type: 'string' }, 'password-stdin': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
    allowPositionals: false,
  }).values;
} catch (err) {
  fail(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
}
if (args.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
if (!args.email) fail(`--email is required\n${USAGE}`);

let env;
try {
  env = loadCreateAdminEnv();
} catch (err) {
  fail(err instanceof Error ? err.message : String(err));
}

let password: string;
if (args['password-stdin']) {
  password = await readStdin();
} else if (env.ADMIN_PASSWORD !== undefined) {
  password = env.ADMIN_PASSWORD;
} else if (process.stdin.isTTY) {
  password = await promptHidden('Password: ').catch(() => fail('cancelled', 1));
  const again = await promptHidden('Password again: ').catch(() => fail('cancelled', 1));
  if (again !== password) fail('the passwords differ', 1);
} else {
  fail(`no password: pass --password-stdin and pipe it in, set ADMIN_PASSWORD, or run on a terminal to be asked\n${USAGE}`);
}

const database = await createDb(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL, poolMax: 1 } : { dataDir: join(env.DATA_DIR, 'pglite') }).catch(
  (err: unknown) => {
    if (!(err instanceof DataDirInUseError)) throw err;
    return fail(
      `${err.dataDir} is open in process ${err.holderPid} (a running control plane or pnpm start): stop it first, or set DATABASE_URL to the control plane's PostgreSQL`,
      1,
    );
  },
);
try {
  await migrateToLatest(database.db);
  const user = await createPlatformAdmin(database.db, { email: args.email, password, displayName: args.name ?? null });
  process.stdout.write(`created platform admin ${user.email} (${user.id})\n`);
} catch (err) {
  await database.close();
  if (err instanceof ServiceError) fail(`${err.message}${err.param ? ` (${err.param})` : ''}`, 1);
  throw err;
}
await database.close();
