import { readFileSync } from 'node:fs';
import { chmod, rename, writeFile } from 'node:fs/promises';
import { configSnapshotSchema } from '@infer/shared';
import type { ConfigSnapshot } from '@infer/shared';

/** Reads and validates a JSON ConfigSnapshot file; throws with the path and the first problem. */
export function readSnapshotFile(path: string): ConfigSnapshot {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read config snapshot ${path}: ${(err as Error).message}`);
  }
  const parsed = configSnapshotSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`invalid config snapshot ${path}: ${issue?.path.join('.') ?? ''} ${issue?.message ?? ''}`.trim());
  }
  return parsed.data;
}

/** Writes a snapshot atomically (tmp + rename), readable by the owner only: it holds key hashes. */
export async function writeSnapshotFile(path: string, snapshot: ConfigSnapshot): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(snapshot), { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}
