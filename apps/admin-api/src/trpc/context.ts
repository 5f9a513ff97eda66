import type { CreateFastifyContextOptions } from '@trpc/server/adapters/fastify';
import type { Db } from '../db.ts';

export interface PublicUrls {
  /** `{base_url}/endpoints/v1` of the shared surface. */
  readonly sharedBaseUrl: string;
  /** Origin of the data plane; dedicated URLs are built under it. */
  readonly dataplaneUrl: string;
}

export interface TrpcContext {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
}

/** The context without HTTP: tests and server-side callers build it directly. */
export async function createContextInner(opts: { db: Db; publicUrls: PublicUrls }): Promise<TrpcContext> {
  return { db: opts.db, publicUrls: opts.publicUrls };
}

/** The per-request factory for the Fastify adapter (sessions join here in the API issue). */
export function createContextFactory(opts: { db: Db; publicUrls: PublicUrls }) {
  return async (_http: CreateFastifyContextOptions): Promise<TrpcContext> => createContextInner(opts);
}
