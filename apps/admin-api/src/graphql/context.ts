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

interface Batch<V> {
  readonly ids: Set<string>;
  readonly result: Promise<Map<string, V>>;
}

/**
 * The value for `id` from one `load` of every id asked for under `key` in the same tick (the items of a list are
 * resolved together): a per-row field costs one query per page, not one per row. `none` where `load` has no entry.
 */
export function batched<V>(ctx: GraphQLContext, key: string, id: string, load: (ids: string[]) => Promise<Map<string, V>>, none: V): Promise<V> {
  const slot = `batch:${key}`;
  let batch = ctx.memo.get(slot) as unknown as Batch<V> | undefined;
  if (batch === undefined) {
    const ids = new Set<string>();
    const result = Promise.resolve().then(() => {
      ctx.memo.delete(slot); // ids asked for later go in a batch of their own
      return load([...ids]);
    });
    batch = { ids, result };
    ctx.memo.set(slot, batch as unknown as Promise<unknown>);
  }
  batch.ids.add(id);
  return batch.result.then((m) => m.get(id) ?? none);
}
