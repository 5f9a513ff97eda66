import { readFileSync } from 'node:fs';
import { chmod, rename, writeFile } from 'node:fs/promises';
import { configSnapshotSchema, deriveSecretKey, isSealed, openSecret, sealSecret } from '@infer/shared';
import type { ConfigSnapshot, SnapshotUpstream } from '@infer/shared';

const FILE_KEY_ID = 'node';

/**
 * The key that seals upstream API keys in a node's snapshot file, derived from the node's credential:
 * the file alone (a backup, a copied disk) does not give the provider keys away.
 */
export const snapshotFileKey = (nodeToken: string): Buffer => deriveSecretKey(nodeToken, 'dataplane-snapshot-file');

function mapUpstreamKeys(s: ConfigSnapshot, f: (apiKey: string) => string): ConfigSnapshot {
  const up = (u: SnapshotUpstream): SnapshotUpstream => (u.apiKey === null ? u : { ...u, apiKey: f(u.apiKey) });
  return {
    ...s,
    endpoints: s.endpoints.map((e) => ({ ...e, upstreams: e.upstreams.map(up) })),
    deployments: s.deployments.map((d) => ({ ...d, replicas: d.replicas.map(up) })),
  };
}

/**
 * Reads and validates a JSON ConfigSnapshot file; throws with the path and the first problem. Sealed
 * upstream API keys are opened with `key` (a file written by `writeSnapshotFile`); plaintext ones (an
 * operator's CONFIG_FILE) are taken as they are.
 */
export function readSnapshotFile(path: string, key?: Buffer): ConfigSnapshot {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read config snapshot ${path}: ${(err as Error).message}`, { cause: err });
  }
  const parsed = configSnapshotSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`invalid config snapshot ${path}: ${issue?.path.join('.') ?? ''} ${issue?.message ?? ''}`.trim());
  }
  const keys = key ? new Map([[FILE_KEY_ID, key]]) : new Map<string, Buffer>();
  try {
    return mapUpstreamKeys(parsed.data, (k) => (isSealed(k) ? openSecret(k, keys) : k));
  } catch (err) {
    throw new Error(`config snapshot ${path} holds upstream API keys sealed for another node credential`, { cause: err });
  }
}

/**
 * Writes a snapshot atomically (tmp + rename), readable by the owner only (it holds key hashes), with
 * upstream API keys sealed by `key` (AES-256-GCM).
 */
export async function writeSnapshotFile(path: string, snapshot: ConfigSnapshot, key?: Buffer): Promise<void> {
  const stored = key ? mapUpstreamKeys(snapshot, (k) => sealSecret(k, key, FILE_KEY_ID)) : snapshot;
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(stored), { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}
