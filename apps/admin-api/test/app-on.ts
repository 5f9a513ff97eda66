import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { createTestDb, type TestDatabase } from '@infer/db/testing';
import { buildAdminApp, type AdminAppOptions } from '../src/app.ts';
import { NODE_TOKEN } from './helpers.ts';
import { PUBLIC_URLS } from './trpc-fixtures.ts';

export interface RunningApp {
  app: FastifyInstance;
  baseUrl: string;
  close(): Promise<void>;
}

/** An admin app with `extra` options over an existing test database, listening on a random port (the database stays open). */
export async function appOn(database: TestDatabase, extra: Partial<AdminAppOptions> = {}): Promise<RunningApp> {
  const app = await buildAdminApp({
    db: database.db,
    dbKind: database.kind,
    pgPool: database.pool,
    nodeToken: NODE_TOKEN,
    publicUrls: PUBLIC_URLS,
    outboxPrune: false,
    ...extra,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, baseUrl: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() };
}

/** An admin app serving a console build made of `files` (path under the web root -> content), on its own PGlite. */
export async function consoleAppOn(files: Readonly<Record<string, string>>): Promise<RunningApp> {
  const webRoot = await mkdtemp(join(tmpdir(), 'console-'));
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(webRoot, path)), { recursive: true });
    await writeFile(join(webRoot, path), content);
  }
  const database = await createTestDb('pglite');
  const t = await appOn(database, { webRoot });
  return {
    ...t,
    close: async () => {
      await t.close();
      await database.close();
      await rm(webRoot, { recursive: true, force: true });
    },
  };
}

export const cookieOf = (setCookie: string[]): string => {
  const c = setCookie.find((s) => s.startsWith('session=') && !s.includes('Max-Age=0'));
  if (!c) throw new Error('no session cookie set');
  return c.split(';')[0]!;
};

export interface GqlResponse {
  status: number;
  headers: Headers;

  body: { data?: any; errors?: { message: string; extensions?: { code?: string; param?: string | null } }[] };
}

/** One GraphQL POST over real HTTP. */
export async function gql(baseUrl: string, query: string, headers: Record<string, string> = {}, variables?: Record<string, unknown>): Promise<GqlResponse> {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as GqlResponse['body'] };
}
