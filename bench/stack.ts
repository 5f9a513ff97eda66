import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configSnapshotSchema, generateSecret, hashSecret, secretDisplayPrefix, SECRET_PREFIX, type ConfigSnapshot } from '@infer/shared';
import { buildDataplane } from '../apps/dataplane/build.ts';
import { DATAPLANE_NODE_ENV, DATAPLANE_NODE_FLAGS } from '../apps/dataplane/src/node-flags.ts';
import { freePort, rssKiB, startNode, waitReady, type Child } from './processes.ts';

/** The catalog name clients send to the data plane; the upstream serves it under another name. */
export const BENCH_MODEL = 'bench-model';

const root = (rel: string): string => fileURLToPath(new URL(`../${rel}`, import.meta.url));

export interface StackOptions {
  /** An already-running OpenAI-compatible runtime (base URL without /v1), or null to start runtime-sim. */
  readonly upstream: string | null;
  readonly servedModel: string;
  readonly upstreamKey: string | null;
  /** Write a V8 CPU profile of the data plane into this folder (`--cpu-prof`). */
  readonly cpuProfDir?: string | null;
  /** More Node flags for the data plane (e.g. `--expose-gc --import <probe>` when chasing memory). */
  readonly dataplaneNodeArgs?: readonly string[];
}

export interface Stack {
  readonly upstreamUrl: string;
  readonly dataplaneUrl: string;
  readonly dataplane: Child;
  /** The runtime-sim process, when the bench started one. */
  readonly sim: Child | null;
  /** The reference floor (bench/bare-proxy.ts) in front of the same upstream. */
  readonly bareProxyUrl: string;
  readonly bareProxy: Child;
  readonly apiKey: string;
  /** The environment the data plane was started with (less PORT), to start another node beside it. */
  readonly dataplaneEnv: Readonly<Record<string, string>>;
  /** Data-plane RSS (KiB) once ready, before any load. */
  readonly dataplaneReadyRssKiB: number | null;
  /** Stops the data plane gracefully (so it flushes usage), then everything else; resolves the usage records the sink got. */
  stop(): Promise<{ readonly usageRecords: number }>;
}

function benchSnapshot(upstreamUrl: string, servedModel: string, upstreamKey: string | null, secret: string, kind: 'sim' | 'openai'): ConfigSnapshot {
  return configSnapshotSchema.parse({
    version: 1,
    tenants: [{ id: 'tenant-bench', slug: 'bench', rpmLimit: null, tpmLimit: null }],
    keys: [
      {
        id: 'key-bench',
        tenantId: 'tenant-bench',
        hash: hashSecret(secret),
        prefix: secretDisplayPrefix(secret),
        expiresAt: null,
        rpmLimit: null,
        tpmLimit: null,
      },
    ],
    endpoints: [
      {
        id: 'endpoint-bench',
        name: BENCH_MODEL,
        provider: 'bench',
        contextLength: 32768,
        concurrency: 4, // "4x": 128 in flight per replica, so the gate (still on) is not what the bench measures
        coldStartSeconds: null,
        offeredShared: true,
        offeredDedicated: false,
        published: true,
        priceInputPerM: 0.1,
        priceOutputPerM: 0.2,
        upstreams: [{ id: 'upstream-bench', url: upstreamUrl, kind, servedModel, apiKey: upstreamKey }],
      },
    ],
    deployments: [],
  });
}

/** Starts (unless given an upstream) runtime-sim, the usage sink and one data-plane node, and waits until all are ready. */
export async function startStack(o: StackOptions): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'infer-bench-'));
  const cleanupDir = (): void => rmSync(dir, { recursive: true, force: true });
  process.on('exit', cleanupDir);

  let sim: Child | null = null;
  let upstreamUrl = o.upstream;
  if (upstreamUrl === null) {
    const simPort = await freePort();
    sim = startNode('runtime-sim', root('packages/runtime-sim/src/cli.ts'), [
      '--port',
      String(simPort),
      '--host',
      '127.0.0.1',
      '--model',
      o.servedModel,
      '--ttft-ms',
      '0',
      '--itl-ms',
      '0',
      '--batch-slots',
      '4096',
      '--max-queue',
      '100000',
    ]);
    upstreamUrl = `http://127.0.0.1:${simPort}`;
  }

  const secret = generateSecret(SECRET_PREFIX.inference);
  const configFile = join(dir, 'snapshot.json');
  const snapshot = benchSnapshot(upstreamUrl, o.servedModel, o.upstreamKey, secret, sim ? 'sim' : 'openai');
  writeFileSync(configFile, JSON.stringify(snapshot), { mode: 0o600 });

  // The control plane's stand-in runs in its own process, so that parsing usage batches never stalls the
  // load generator's clock (in production the control plane is on another machine).
  const stubPort = await freePort();
  const stub = startNode('control-plane-stub', root('bench/control-plane-stub.ts'), [String(stubPort), configFile]);
  const stubUrl = `http://127.0.0.1:${stubPort}`;
  await waitReady(stub, `${stubUrl}/healthz`);
  const dpPort = await freePort();
  const dataplaneEnv = {
    ...DATAPLANE_NODE_ENV,
    HOST: '127.0.0.1',
    CONFIG_FILE: configFile,
    CONTROL_PLANE_URL: stubUrl,
    NODE_TOKEN: 'bench-node-token',
    USAGE_SPOOL_DIR: join(dir, 'usage-spool'),
    LOG_LEVEL: 'warn',
  };
  // As in production: the bundle (apps/dataplane/build.ts), with the production Node flags and environment.
  const dataplane = startNode('dataplane', await buildDataplane(), [], { ...dataplaneEnv, PORT: String(dpPort) }, [
    ...DATAPLANE_NODE_FLAGS,
    ...(o.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', o.cpuProfDir] : []),
    ...(o.dataplaneNodeArgs ?? []),
  ]);
  const dataplaneUrl = `http://127.0.0.1:${dpPort}`;

  const barePort = await freePort();
  const bareProxy = startNode('bare-proxy', root('bench/bare-proxy.ts'), [String(barePort), upstreamUrl, o.servedModel]);
  const bareProxyUrl = `http://127.0.0.1:${barePort}`;

  if (sim) await waitReady(sim, `${upstreamUrl}/health`);
  await waitReady(dataplane, `${dataplaneUrl}/readyz`);
  await waitReady(bareProxy, `${bareProxyUrl}/healthz`);

  return {
    upstreamUrl,
    dataplaneUrl,
    dataplane,
    sim,
    bareProxyUrl,
    bareProxy,
    apiKey: secret,
    dataplaneEnv,
    dataplaneReadyRssKiB: rssKiB(dataplane.pid),
    async stop() {
      dataplane.proc.kill('SIGTERM');
      await exitOf(dataplane, 5000);
      sim?.proc.kill('SIGTERM');
      if (sim) await exitOf(sim, 2000);
      bareProxy.proc.kill('SIGTERM');
      await exitOf(bareProxy, 2000);
      const usageRecords = await usageCount(stubUrl);
      stub.proc.kill('SIGTERM');
      await exitOf(stub, 2000);
      cleanupDir();
      return { usageRecords };
    },
  };
}

/** Waits for a child to exit, killing it after `ms`. */
async function exitOf(child: Child, ms: number): Promise<void> {
  if (child.exited()) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      child.proc.kill('SIGKILL');
      resolve();
    }, ms);
    child.proc.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** The usage records the control-plane stub has counted. */
async function usageCount(stubUrl: string): Promise<number> {
  const res = await fetch(`${stubUrl}/count`, { signal: AbortSignal.timeout(5000) });
  const body = (await res.json()) as { records?: unknown };
  if (typeof body.records !== 'number') throw new Error('control-plane stub: no usage count');
  return body.records;
}
