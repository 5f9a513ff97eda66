// Issue 9, finding 7: PGlite's files were world-readable and writable when DATA_DIR was not made by
// `pnpm start`. Opened here under the most permissive umask, in a fresh folder and in one made 0777.
import { mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest } from '../src/index.ts';

/** Every mode under `dir` (the folder itself included), as 'dir 700' / 'file 600' counts. */
async function modes(dir: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const add = (key: string) => void (out[key] = (out[key] ?? 0) + 1);
  add(`dir ${((await stat(dir)).mode & 0o777).toString(8)}`);
  const walk = async (folder: string): Promise<void> => {
    for (const e of await readdir(folder, { withFileTypes: true })) {
      const path = join(folder, e.name);
      if (e.isDirectory()) {
        add(`dir ${((await stat(path)).mode & 0o777).toString(8)}`);
        await walk(path);
      } else if (e.isFile()) add(`file ${((await stat(path)).mode & 0o777).toString(8)}`);
    }
  };
  await walk(dir);
  return out;
}

describe('PGlite data folder permissions', () => {
  let root: string;
  let previousUmask: number;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'infer-perms-'));
    previousUmask = process.umask(0o000);
  });
  afterAll(async () => {
    process.umask(previousUmask);
    await rm(root, { recursive: true, force: true });
  });

  it.each(['fresh', 'made 0777 by someone else'])('keeps folders 0700 and files 0600 (%s)', { timeout: 180_000 }, async (how) => {
    const dataDir = join(root, how === 'fresh' ? 'a/b/pglite' : 'open/pglite');
    if (how !== 'fresh') await mkdir(dataDir, { recursive: true, mode: 0o777 });

    const database = await createDb({ dataDir });
    // While open, the folder is the owner's alone before anything else is looked at.
    expect(((await stat(dataDir)).mode & 0o777).toString(8)).toBe('700');
    await migrateToLatest(database.db);
    await database.db.insertInto('tenants').values({ slug: 'perm', name: 'P' }).execute();
    await database.close();

    const found = await modes(dataDir);
    expect(Object.keys(found).sort()).toEqual(['dir 700', 'file 600']);
    expect(found['file 600']).toBeGreaterThan(100);
    if (how === 'fresh') expect(((await stat(join(root, 'a'))).mode & 0o777).toString(8)).toBe('700');
  });
});
