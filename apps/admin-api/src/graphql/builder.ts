import SchemaBuilder from '@pothos/core';
import ComplexityPlugin from '@pothos/plugin-complexity';
import { toGraphQLError } from '../error-mapping.ts';
import { ServiceError } from '../errors.ts';
import { inApiYears } from '../instant.ts';
import type { GraphQLContext } from './context.ts';

/** The one Pothos builder; type files under modules import it and add their own fields. */
export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  DefaultFieldNullability: false;
  Scalars: { DateTime: { Input: Date; Output: Date | string } };
}>({
  defaultFieldNullability: false,
  plugins: [ComplexityPlugin],
  complexity: {
    defaultComplexity: 1,
    defaultListMultiplier: 10,
    // Checked once per operation before any root field resolves (with the variables' values); the depth
    // limit is a validation rule (depth-limit.ts) so that it covers introspection too.
    limit: (ctx) => ({ complexity: ctx.limits.maxComplexity }),
    // Nothing has run yet: the whole request is refused (a 400, as the alias and field caps answer), not a 200 whose
    // data is null.
    complexityError: (kind, r) =>
      toGraphQLError(
        new ServiceError(
          'invalid',
          kind === 'Depth'
            ? `Query is too deep: depth ${r.depth} exceeds the maximum of ${r.maxDepth}.`
            : kind === 'Complexity'
              ? `Query is too costly: cost ${r.complexity} exceeds the budget of ${r.maxComplexity}. Ask for fewer items (first) or fewer fields.`
              : `Query is too broad: breadth ${r.breadth} exceeds the maximum of ${r.maxBreadth}.`,
        ),
        undefined,
        true,
      ),
  },
});

/** The builder's type parameters, for helpers that take a field builder. */
export type BuilderTypes = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

builder.queryType({});
builder.mutationType({ description: 'Changes for infra automation (admin tokens) and console users with the right role.' });

const ISO = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

const daysIn = (y: number, m: number): number => (m === 2 ? (y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31);

/**
 * A real calendar date and time of day, year 0001 to 9999. `new Date` rolls an impossible day over
 * ("2030-02-30" is March 2nd) and takes year 0000, which PostgreSQL refuses with a database error.
 */
function realDateTime(value: string): boolean {
  const [y, m, d, h = 0, min = 0, sec = 0] = (/^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2}))?)?/.exec(value) ?? [])
    .slice(1)
    .map((x) => (x === undefined ? undefined : Number(x))) as number[];
  if (y === undefined || m === undefined || d === undefined) return false;
  return y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= daysIn(y, m) && h <= 23 && min <= 59 && sec <= 59;
}

function parseDateTime(value: unknown): Date {
  if (typeof value === 'string' && ISO.test(value) && realDateTime(value)) {
    const d = new Date(value);
    // In UTC too ("9999-12-31T23:00-14:00" is year 10000, which this scalar could not give back as it took it).
    if (inApiYears(d)) return d;
  }
  throw new ServiceError('invalid', 'DateTime must be an ISO 8601 date or date-time string of a real date, years 0001 to 9999');
}

builder.scalarType('DateTime', {
  description: 'An ISO 8601 date-time in UTC, e.g. "2026-01-31T12:00:00.000Z".',
  serialize: (value) => new Date(value).toISOString(),
  parseValue: parseDateTime,
  // Literal nodes are plain objects: `{ kind: 'StringValue', value }` (no graphql import needed).
  parseLiteral: (node) => parseDateTime((node as { kind: string; value?: unknown }).kind === 'StringValue' ? (node as { value: unknown }).value : undefined),
});
