import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { DatabaseKind } from '@infer/db';
import { createTestDb, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp } from '../src/app.ts';

export const NODE_TOKEN = 'test-node-token-0123456789abcdef';

export interface TestApp {
  database: TestDatabase;
  app: FastifyInstance;
  baseUrl: string;
  close(): Promise<void>;
}

/** A migrated database of `kind` and the admin app listening on a random port. */
export async function startTestApp(kind: DatabaseKind): Promise<TestApp> {
  const database = await createTestDb(kind);
  const app = await buildAdminApp({
    db: database.db,
    dbKind: database.kind,
    pgPool: database.pool,
    nodeToken: NODE_TOKEN,
    publicUrls: { sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return {
    database,
    app,
    baseUrl: `http://127.0.0.1:${port}`,
    async close() {
      await app.close();
      await database.close();
    },
  };
}

export interface SseEvent {
  event: string;
  id: string | undefined;
  data: string;
}

/** Reads an SSE body incrementally; `next()` resolves with the next event (comments skipped). */
export function sseReader(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const queue: SseEvent[] = [];
  let comments = 0;
  // One read in flight at a time, kept across timeouts so no chunk is lost to an abandoned read.
  let pendingRead: Promise<ReadableStreamReadResult<Uint8Array>> | undefined;

  function parseBlocks(): void {
    let i: number;
    while ((i = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, i);
      buffer = buffer.slice(i + 2);
      let event = 'message';
      let id: string | undefined;
      const data: string[] = [];
      let hasField = false;
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          comments++;
          continue;
        }
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'id') id = value;
        else if (field === 'data') data.push(value);
        if (field === 'event' || field === 'id' || field === 'data') hasField = true;
      }
      if (hasField && data.length > 0) queue.push({ event, id, data: data.join('\n') });
    }
  }

  return {
    get comments() {
      return comments;
    },
    async next(timeoutMs = 2000): Promise<SseEvent> {
      const deadline = Date.now() + timeoutMs;
      while (queue.length === 0) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new Error('timed out waiting for an SSE event');
        let timer: NodeJS.Timeout | undefined;
        const result = await Promise.race([
          (pendingRead ??= reader.read()),
          new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), remaining))),
        ]);
        clearTimeout(timer);
        if (result === 'timeout') throw new Error('timed out waiting for an SSE event');
        pendingRead = undefined;
        if (result.done) throw new Error('SSE stream ended');
        buffer += decoder.decode(result.value, { stream: true }).replace(/\r\n/g, '\n');
        parseBlocks();
      }
      return queue.shift()!;
    },
    /** Resolves true when nothing arrives within `ms`. */
    async quiet(ms: number): Promise<boolean> {
      try {
        await this.next(ms);
        return false;
      } catch {
        return true;
      }
    },
    async cancel(): Promise<void> {
      await reader.cancel().catch(() => undefined);
    },
  };
}
