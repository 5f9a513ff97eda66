import type { Db } from '../db.ts';
import type { Principal } from '../modules/access/principal.ts';
import type { DeploymentsContext } from '../modules/deployments/deployments-context.ts';
import type { PublicUrls } from '@infer/shared';

/** Depth and cost budget of one GraphQL operation. */
export interface GraphQLLimits {
  /** Deepest field nesting (the schema's own queries need at most 6). */
  readonly maxDepth: number;
  /** Introspection is cyclic and tooling's standard query nests ~12 levels. */
  readonly maxIntrospectionDepth: number;
  /** Cost budget: each field costs 1 (aggregates far more), times the page size (`first`) or 10 for lists, nested. */
  readonly maxComplexity: number;
  /** Aliased fields per operation (aliases are how one costly field is asked for many times). */
  readonly maxAliases: number;
  /** Field selections per operation, fragments expanded. */
  readonly maxFields: number;
}

export const DEFAULT_GRAPHQL_LIMITS: GraphQLLimits = Object.freeze({
  maxDepth: 10,
  maxIntrospectionDepth: 15,
  maxComplexity: 5000,
  maxAliases: 30,
  maxFields: 1000,
});

/** What resolvers get: the database, the resolved caller, the public URLs and the operation budget. */
export interface GraphQLContext {
  readonly db: Db;
  readonly principal: Principal;
  readonly publicUrls: PublicUrls;
  readonly limits: GraphQLLimits;
  /** The deployment service's context (provisioners, reconciler). */
  readonly deployments: DeploymentsContext;
  /** Per-request memo (e.g. the caller's deployments, read once for a whole catalog page). */
  readonly memo: Map<string, Promise<unknown>>;
  /**
   * Takes more of the caller's work budget (throws `rate_limited` past it): a resolver that runs a database aggregate
   * charges it before running, so an operation the cost limit refuses (before any resolver) is never charged for it.
   */
  readonly charge: (points: number) => void;
}

/** Runs `load` once per request for `key`. */
export function memoise<T>(ctx: GraphQLContext, key: string, load: () => Promise<T>): Promise<T> {
  let hit = ctx.memo.get(key) as Promise<T> | undefined;
  if (!hit) {
    hit = load();
    ctx.memo.set(key, hit);
  }
  return hit;
}
