import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from './platform.ts';

/** The platform serves apps/web/dist: build it first if it is missing or stale. */
export default function setup(): void {
  execFileSync(process.execPath, [join(repoRoot, 'apps/web/scripts/ensure-built.ts')], { stdio: 'inherit' });
}
