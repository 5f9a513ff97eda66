import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import type { ConfigSnapshot } from '@infer/shared';

export interface SimPlan {
  readonly port: number;
  readonly models: readonly string[];
  /** The largest Context Length of the entries it serves (runtime-sim's own default, 32768, when none has one). */
  readonly maxContextLength: number | null;
}

/**
 * One simulator process per local port named by a shared `sim` upstream, serving every model routed
 * there. Dedicated replicas are not here: the control plane's local provisioner starts those.
 */
export function planSims(snapshot: ConfigSnapshot): SimPlan[] {
  const byPort = new Map<number, { models: Set<string>; maxContextLength: number | null }>();
  for (const e of snapshot.endpoints) {
    for (const u of e.upstreams) {
      if (u.kind !== 'sim') continue;
      const url = new URL(u.url);
      if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') continue;
      const port = Number(url.port);
      const plan = byPort.get(port) ?? { models: new Set<string>(), maxContextLength: null };
      plan.models.add(u.servedModel);
      // The data plane checks prompts against the catalog's Context Length; the runtime must accept as much.
      if (e.contextLength !== null) plan.maxContextLength = Math.max(plan.maxContextLength ?? 0, e.contextLength);
      byPort.set(port, plan);
    }
  }
  return [...byPort.entries()].sort((a, b) => a[0] - b[0]).map(([port, plan]) => ({ port, models: [...plan.models], maxContextLength: plan.maxContextLength }));
}

/** Parses KEY=VALUE lines (no quoting: the values we write never need it). */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/**
 * Polls a URL until it answers 2xx (and, with `ready`, until its JSON body satisfies it), or throws after `timeoutMs`
 * naming what it last got.
 */
export async function waitForHttp(url: string, timeoutMs: number, ready?: (body: unknown) => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      const text = await res.text();
      if (res.ok && (ready === undefined || ready(JSON.parse(text)))) return;
      last = res.ok ? `answered ${text.slice(0, 200)}` : `status ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`${url} did not become ready within ${timeoutMs} ms (${last})`);
}

/** True once no deployment is still provisioning, so the printed dedicated URL answers at once. */
export function deploymentsSettled(
  snapshot: Pick<ConfigSnapshot, 'deployments'> & { deployments: ReadonlyArray<{ state: string; replicas: readonly unknown[] }> },
): boolean {
  return snapshot.deployments.every((d) => d.state !== 'provisioning' && d.state !== 'pending' && (d.state !== 'running' || d.replicas.length > 0));
}

/** Null when `port` can be listened on at `host`, else why not (EADDRINUSE, EACCES, ...). */
export function portProblem(host: string, port: number): Promise<string | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(null)));
  });
}

/** A port free on `host` now (the kernel's pick). */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** One line for a port that cannot be used, naming the variable that moves it. */
export function portMessage(port: number, host: string, problem: string, variable: string): string {
  const what = problem === 'EADDRINUSE' ? 'is already in use' : `cannot be used (${problem})`;
  return `[start] port ${port} on ${host} ${what} (is another pnpm start running?): stop it, or set ${variable} to a free port`;
}

/** Writes `text` to `path` whole or not at all (a temp file renamed over it), readable by the owner only. */
export function writeFileAtomic(path: string, text: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  rmSync(temp, { force: true }); // one left by a crash: never write secrets into a file with another mode
  writeFileSync(temp, text, { mode: 0o600, flag: 'wx' });
  renameSync(temp, path);
}
