import { trimTrailingSlashes } from '@infer/shared';
import { LOAD_REPORT_PATH, WAKE_PATH } from '@infer/shared';
import type { LoadReport } from '@infer/shared';
import { request } from 'undici';

/** The node's side of the serverless channel to the control plane (wake now, load every second). */
export interface NodeChannel {
  readonly nodeId: string;
  /** Asks the control plane to wake a deployment; resolves true on 2xx, false otherwise (never rejects). */
  wake(deploymentId: string): Promise<boolean>;
  /** Sends one load report; resolves true on 2xx, false otherwise (never rejects). */
  report(report: LoadReport): Promise<boolean>;
}

export interface NodeChannelOptions {
  /** Control-plane base URL. */
  readonly url: string;
  /** The node's credential, sent as the usage reporter and config client send it. */
  readonly nodeToken: string;
  readonly nodeId: string;
  /** Per-call timeout, ms (default 2 s): a slow control plane must never hold a report or a wake long. */
  readonly timeoutMs?: number;
  readonly onError?: (err: unknown) => void;
}

/** POSTs JSON to the control plane's node routes with the node's bearer credential. */
export function createNodeChannel(opts: NodeChannelOptions): NodeChannel {
  const base = trimTrailingSlashes(opts.url);
  const authorization = `Bearer ${opts.nodeToken}`;
  const timeout = opts.timeoutMs ?? 2000;

  const post = async (path: string, body: unknown): Promise<boolean> => {
    try {
      const res = await request(base + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization },
        body: JSON.stringify(body),
        headersTimeout: timeout,
        bodyTimeout: timeout,
      });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) return true;
      opts.onError?.(new Error(`${path} answered HTTP ${res.statusCode}`));
    } catch (err) {
      opts.onError?.(err);
    }
    return false;
  };

  return {
    nodeId: opts.nodeId,
    wake: (deploymentId) => post(WAKE_PATH, { nodeId: opts.nodeId, deploymentId }),
    report: (report) => post(LOAD_REPORT_PATH, report),
  };
}
