import { requireAuthenticated } from '../access/access.ts';
import type { Principal } from '../access/principal.ts';
import type { DeploymentsContext } from './deployments-context.ts';
import { provisionerKinds, type ProvisionerKind } from './provisioners/provisioner.ts';

/** The provisioners this control plane can deploy with (Kubernetes only when configured), for the deploy form. */
export function availableProvisioners(ctx: DeploymentsContext, principal: Principal): ProvisionerKind[] {
  requireAuthenticated(principal);
  return provisionerKinds.filter((k) => ctx.provisioners[k] !== undefined);
}
