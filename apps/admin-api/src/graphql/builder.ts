import SchemaBuilder from '@pothos/core';
import type { GraphQLContext } from './context.ts';

/** The one Pothos builder; type files under modules import it and add their own fields. */
export const builder = new SchemaBuilder<{ Context: GraphQLContext; DefaultFieldNullability: false }>({
  defaultFieldNullability: false,
});

builder.queryType({});
