import { builder } from '../builder.ts';
import './page-info.ts';
import '../../modules/catalog/catalog.graphql.ts';
import '../../modules/tenants/tenants.graphql.ts';
import '../../modules/tenants/invitations.graphql.ts';
import '../../modules/keys/keys.graphql.ts';
import '../../modules/deployments/deployments.graphql.ts';
import '../../modules/usage/usage.graphql.ts';
import '../../modules/nodes/node-credentials.graphql.ts';

/** The whole GraphQL schema, assembled from the type files imported above. */
export const schema = builder.toSchema({ sortSchema: true });
