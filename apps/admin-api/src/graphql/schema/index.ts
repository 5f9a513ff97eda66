import { builder } from '../builder.ts';
import './page-info.ts';
import '../../modules/catalog/catalog.graphql.ts';

/** The whole GraphQL schema, assembled from the type files imported above. */
export const schema = builder.toSchema();
