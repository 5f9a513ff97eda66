// `prestart`: builds the console when apps/web/dist is missing or older than its sources, so that
// `pnpm start` on a fresh clone serves the real console. A no-op (a few ms) when the build is current.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const webRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const built = join(webRoot, 'dist', 'index.html');

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

const sources = ['src', 'index.html', 'vite.config.ts', 'package.json', '../admin-api/src/trpc'].map((p) => join(webRoot, p)).filter(existsSync);
const sourceTime = Math.max(...sources.map(newestMtime));
const builtTime = existsSync(built) ? statSync(built).mtimeMs : 0;

if (builtTime >= sourceTime) {
  console.log('[web] console build is current');
} else {
  console.log(existsSync(built) ? '[web] console sources changed: rebuilding' : '[web] building the console (first run)');
  // A test runner's NODE_ENV=test would otherwise give a development React bundle.
  process.env['NODE_ENV'] = 'production';
  const { build } = await import('vite');
  await build({ root: webRoot, configFile: join(webRoot, 'vite.config.ts'), mode: 'production', logLevel: 'warn' });
  console.log('[web] console built into apps/web/dist');
}
