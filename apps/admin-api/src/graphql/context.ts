import type { Db } from '../db.ts';

/** What resolvers get; auth (session / admin token) joins here in the API issue. */
export interface GraphQLContext {
  readonly db: Db;
}
