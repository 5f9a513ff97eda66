import type { FastifyPluginAsync } from 'fastify';
import type { ConfigDelta } from '@infer/shared';
import type { Db } from '../../db.ts';
import { nodeCredentialActive, nodeCredentialEvents } from '../nodes/node-credentials.service.ts';
import { revealDelta, revealSnapshot } from '../secrets/upstream-secrets.ts';
import type { ChangeHub } from './change-hub.ts';
import { buildSnapshot, deltasSince } from './snapshots.service.ts';

export interface SnapshotRoutesOptions {
  readonly db: Db;
  readonly hub: ChangeHub;
  readonly pingMs?: number;
  /** How often an open stream re-checks its node credential (revokes made on another replica). */
  readonly credentialRecheckMs?: number;
}

/** A node that stops reading is cut off past this much unsent data; it resumes with Last-Event-ID. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

function parseLastEventId(header: string | string[] | undefined): number | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !/^\d{1,15}$/.test(value.trim())) return null;
  return Number(value.trim());
}

/**
 * The config feed for data-plane nodes (mount under the node credential guard; upstream API keys are
 * opened here, in memory, and leave only over this authenticated channel):
 * `GET /config/snapshot` and `GET /config/stream` (SSE: a snapshot or the missed deltas, then live deltas).
 */
export const snapshotRoutes: FastifyPluginAsync<SnapshotRoutesOptions> = async (app, opts) => {
  const { db, hub, pingMs = 15_000, credentialRecheckMs = 2000 } = opts;
  const open = new Set<() => void>();
  /** Open streams by node credential id, so a revoke ends that node's stream at once. */
  const byCredential = new Map<string, Set<() => void>>();
  const onRevoked = (id: string): void => {
    for (const end of [...(byCredential.get(id) ?? [])]) end();
  };
  nodeCredentialEvents.on('revoked', onRevoked);
  // Fastify's close waits for open connections; end every stream first.
  app.addHook('preClose', async () => {
    nodeCredentialEvents.off('revoked', onRevoked);
    for (const end of [...open]) end();
  });

  app.get('/config/snapshot', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    return revealSnapshot(await buildSnapshot(db));
  });

  app.get('/config/stream', async (request, reply) => {
    const since = parseLastEventId(request.headers['last-event-id']);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 1000\n\n');

    let lastSent = 0;
    let live = false;
    let ended = false;
    const pending: ConfigDelta[] = [];
    const credentialId = request.node?.credentialId ?? null;
    let recheck: NodeJS.Timeout | undefined;
    const end = (): void => {
      if (ended) return;
      ended = true;
      unsubscribe();
      clearInterval(ping);
      clearInterval(recheck);
      open.delete(end);
      if (credentialId !== null) byCredential.get(credentialId)?.delete(end);
      if (!res.writableEnded) res.end();
    };
    const write = (chunk: string): void => {
      if (ended) return;
      res.write(chunk);
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        request.log.warn('config stream consumer too slow; closing');
        end();
      }
    };
    const sendDeltas = (deltas: readonly ConfigDelta[]): void => {
      let chunk = '';
      for (const d of deltas) {
        if (d.version <= lastSent) continue;
        chunk += `event: delta\nid: ${d.version}\ndata: ${JSON.stringify(revealDelta(d))}\n\n`;
        lastSent = d.version;
      }
      if (chunk) write(chunk);
    };

    // Subscribe before reading so nothing committed meanwhile is missed; buffer until caught up.
    const unsubscribe = hub.subscribe((deltas) => {
      if (live) sendDeltas(deltas);
      else pending.push(...deltas);
    });
    const ping = setInterval(() => write(': ping\n\n'), pingMs);
    open.add(end);
    if (credentialId !== null) {
      let set = byCredential.get(credentialId);
      if (!set) byCredential.set(credentialId, (set = new Set()));
      set.add(end);
      recheck = setInterval(() => {
        nodeCredentialActive(db, credentialId).then(
          (active) => {
            if (!active) end();
          },
          () => undefined,
        );
      }, credentialRecheckMs);
    }
    res.on('close', end);

    try {
      await hub.ready;
      const missed = since === null ? null : await deltasSince(db, since);
      if (missed === null) {
        const snapshot = revealSnapshot(await buildSnapshot(db));
        write(`event: snapshot\nid: ${snapshot.version}\ndata: ${JSON.stringify(snapshot)}\n\n`);
        lastSent = snapshot.version;
      } else {
        lastSent = since ?? 0;
        sendDeltas(missed);
      }
      live = true;
      sendDeltas(pending.splice(0));
    } catch (err) {
      request.log.error({ err }, 'config stream failed to start');
      end();
    }
  });
};
