import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { RuntimeKind } from '@infer/shared';
import { trimTrailingSlashes } from '@infer/shared';
import { probe, type Provisioner, type ReplicaRef, type ReplicaSpec, type StartedReplica } from '../provisioner.ts';

export interface LocalProvisionerOptions {
  /**
   * argv that starts a runtime taking runtime-sim's flags (`--port 0 --host --model --ttft-ms --itl-ms
   * --cold-start-ms --max-context-length`) and printing `listening on http://HOST:PORT`. Default: this Node running runtime-sim.
   */
  readonly command?: readonly string[];
  /** Runtime kind recorded for replicas (default 'sim'). */
  readonly runtimeKind?: RuntimeKind;
  readonly host?: string;
  readonly ttftMs?: number;
  readonly itlMs?: number;
  /** The entry's Cold Start TTFT is simulated, capped at this (default 10 s). */
  readonly coldStartCapMs?: number;
  /** How long a replica may take to become healthy beyond its cold start (default 30 s). */
  readonly readyTimeoutMs?: number;
  /** SIGTERM, then SIGKILL after this (default 3 s). */
  readonly stopGraceMs?: number;
}

interface Handle {
  readonly child: ChildProcess;
  readonly deploymentId: string;
  stopping: boolean;
}

function defaultCommand(): string[] {
  const simIndex = createRequire(import.meta.url).resolve('@infer/runtime-sim');
  const guard = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), 'exit-with-parent.ts')).href;
  return [process.execPath, '--import', guard, join(dirname(simIndex), 'cli.ts')];
}

const exited = (child: ChildProcess): boolean => child.exitCode !== null || child.signalCode !== null;

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** The embedded default: each replica is a runtime-sim process on a free port of this machine. */
export function createLocalProvisioner(opts: LocalProvisionerOptions = {}): Provisioner {
  const command = opts.command ?? defaultCommand();
  const host = opts.host ?? '127.0.0.1';
  const coldStartCapMs = opts.coldStartCapMs ?? 10_000;
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  const stopGraceMs = opts.stopGraceMs ?? 3_000;
  const handles = new Map<number, Handle>();
  const listeners: ((deploymentId: string) => void)[] = [];

  async function kill(handle: Handle): Promise<void> {
    handle.stopping = true;
    const { child } = handle;
    if (exited(child)) return;
    child.kill('SIGTERM');
    if (await waitForExit(child, stopGraceMs)) return;
    child.kill('SIGKILL');
    await waitForExit(child, stopGraceMs);
  }

  async function start(spec: ReplicaSpec, signal?: AbortSignal): Promise<StartedReplica> {
    const [file, ...baseArgs] = command;
    if (!file) throw new Error('local provisioner: empty command');
    const coldStartMs = Math.min(Math.max(0, (spec.coldStartSeconds ?? 0) * 1000), coldStartCapMs);
    const args = [
      ...baseArgs,
      '--port',
      '0',
      '--host',
      host,
      '--model',
      spec.servedModel,
      '--cold-start-ms',
      String(Math.round(coldStartMs)),
      // The catalog's Context Length is what the data plane checks prompts against: the runtime must take as much.
      ...(spec.contextLength ? ['--max-context-length', String(spec.contextLength)] : []),
      ...(opts.ttftMs === undefined ? [] : ['--ttft-ms', String(opts.ttftMs)]),
      ...(opts.itlMs === undefined ? [] : ['--itl-ms', String(opts.itlMs)]),
    ];
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    const handle: Handle = { child, deploymentId: spec.deploymentId, stopping: false };
    let output = '';
    /** The runtime said it is warm (runtime-sim's `runtime-sim ready on <url>` line): no /health poll to wait for. */
    let markReady!: () => void;
    const readyLine = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    let pending = '';
    const failure = new Promise<never>((_, reject) => {
      child.once('error', (err) => reject(new Error(`could not start the runtime: ${err.message}`)));
      child.once('exit', (code, sig) => {
        const tail = output.trim().split('\n').slice(-3).join(' | ').slice(0, 400);
        reject(new Error(`the runtime exited before it was ready (${sig ?? `code ${code}`})${tail ? `: ${tail}` : ''}`));
      });
    });
    failure.catch(() => undefined);
    const address = new Promise<string>((resolve) => {
      const onData = (chunk: Buffer) => {
        const text = chunk.toString('utf8');
        output = (output + text).slice(-4000);
        // Whole lines only, each looked at once (a chatty runtime's output is not scanned again and again).
        const lines = (pending + text).split('\n');
        pending = (lines.pop() ?? '').slice(-4000);
        for (const line of lines) {
          const m = /listening on (https?:\/\/\S+)/.exec(line);
          if (m?.[1]) resolve(trimTrailingSlashes(m[1]));
          else if (/\bready on https?:\/\//.test(line)) markReady();
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
    });
    const deadline = Date.now() + coldStartMs + readyTimeoutMs;
    const timeout = new Promise<never>((_, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the runtime was not healthy within ${Math.round((coldStartMs + readyTimeoutMs) / 1000)} s`)),
        deadline - Date.now(),
      );
      child.once('exit', () => clearTimeout(timer));
      timer.unref();
    });
    timeout.catch(() => undefined);
    const aborted = new Promise<never>((_, reject) => {
      if (signal?.aborted) reject(new Error('provisioning was cancelled'));
      signal?.addEventListener('abort', () => reject(new Error('provisioning was cancelled')), { once: true });
    });
    aborted.catch(() => undefined);

    try {
      const url = await Promise.race([address, failure, timeout, aborted]);
      // Ready when the runtime says so on stdout (at once), else when /health answers (runtimes without that line).
      let warm = false;
      void readyLine.then(() => {
        warm = true;
      });
      const healthy = (async () => {
        while (!warm && !(await probe(`${url}/health`, 2_000, signal))) {
          if (warm || signal?.aborted || exited(child)) return;
          await Promise.race([readyLine, new Promise((r) => setTimeout(r, 100))]);
        }
      })();
      await Promise.race([readyLine, healthy, failure, timeout, aborted]);
      if (exited(child)) await failure;
      if (signal?.aborted) throw new Error('provisioning was cancelled');
      if (child.pid === undefined) throw new Error('the runtime has no pid');
      handles.set(child.pid, handle);
      child.once('exit', () => {
        if (child.pid !== undefined) handles.delete(child.pid);
        if (!handle.stopping) for (const l of listeners) l(spec.deploymentId);
      });
      // Keep draining its output so a chatty runtime never blocks on a full pipe.
      child.stdout?.resume();
      child.stderr?.resume();
      return { url, kind: opts.runtimeKind ?? 'sim', servedModel: spec.servedModel, pid: child.pid, port: Number(new URL(url).port) };
    } catch (err) {
      await kill(handle);
      throw err;
    }
  }

  return Object.freeze({
    kind: 'local' as const,
    billsGpuTime: true,
    start,
    async stop(replica: ReplicaRef): Promise<void> {
      const handle = replica.pid === null ? undefined : handles.get(replica.pid);
      if (!handle || handle.deploymentId !== replica.deploymentId) return;
      await kill(handle);
    },
    async health(replica: ReplicaRef): Promise<boolean> {
      // Only replicas this process started count: a row left by an earlier control plane names a dead
      // process (or, worse, a reused pid or port).
      const handle = replica.pid === null ? undefined : handles.get(replica.pid);
      if (!handle || handle.deploymentId !== replica.deploymentId || exited(handle.child)) return false;
      return probe(`${replica.url}/health`, 2_000);
    },
    onExit(listener: (deploymentId: string) => void): void {
      listeners.push(listener);
    },
    async close(): Promise<void> {
      await Promise.all([...handles.values()].map(kill));
    },
  });
}
