import { ServiceError } from '../../errors.ts';
import { builder } from '../builder.ts';

export interface PageInfoShape {
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  startCursor: string | null;
  endCursor: string | null;
}

export const PageInfo = builder.objectRef<PageInfoShape>('PageInfo').implement({
  description: 'Relay cursor pagination state.',
  fields: (t) => ({
    hasNextPage: t.exposeBoolean('hasNextPage'),
    hasPreviousPage: t.exposeBoolean('hasPreviousPage'),
    startCursor: t.exposeString('startCursor', { nullable: true }),
    endCursor: t.exposeString('endCursor', { nullable: true }),
  }),
});

/** Opaque offset cursors: "o:<index>" in base64url. */
export const encodeCursor = (index: number): string => Buffer.from(`o:${index}`).toString('base64url');
export function decodeCursor(cursor: string): number | null {
  const m = /^o:(\d{1,9})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return m?.[1] ? Number(m[1]) : null;
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

export interface Connection<T> {
  edges: { cursor: string; node: T }[];
  pageInfo: PageInfoShape;
  totalCount: number;
}

/** The page `first`/`after` ask for: its size and the index of its first item (forward pagination). */
export function pageWindow(args: { first?: number | null; after?: string | null }): { first: number; start: number } {
  const first = args.first ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(first) || first < 0 || first > MAX_PAGE_SIZE) {
    throw new ServiceError('invalid', `first must be between 0 and ${MAX_PAGE_SIZE}`, 'first');
  }
  if (!args.after) return { first, start: 0 };
  const index = decodeCursor(args.after);
  if (index === null) throw new ServiceError('invalid', 'after is not a valid cursor', 'after');
  return { first, start: index + 1 };
}

/** The connection of one page: `nodes` from index `start` of `total` items, `first` asked for. */
export function connectionOf<T>(nodes: readonly T[], start: number, first: number, total: number): Connection<T> {
  const edges = nodes.map((node, i) => ({ cursor: encodeCursor(start + i), node }));
  return {
    edges,
    totalCount: total,
    pageInfo: {
      hasNextPage: start + first < total,
      hasPreviousPage: start > 0,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}

/** Complexity of a connection field: its page size multiplies the cost of what is selected inside. */
export const connectionComplexity = (args: { first?: number | null }) => ({
  field: 1,
  multiplier: Math.max(1, Math.min(args.first ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)),
});
