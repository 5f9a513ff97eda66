import { ServiceError } from '../../errors.ts';
import type { Principal, TenantRole } from './principal.ts';

/** True for platform admins: a user flagged so, or a platform-wide admin token. */
export function isPlatformAdmin(p: Principal): boolean {
  return (p.kind === 'user' && p.isPlatformAdmin) || (p.kind === 'admin_token' && p.tenantId === null);
}

/** The caller's role in a tenant, or null. Platform admins act as owners everywhere. */
export function roleIn(p: Principal, tenantId: string): TenantRole | null {
  if (isPlatformAdmin(p)) return 'owner';
  if (p.kind === 'user') return p.memberships.get(tenantId) ?? null;
  if (p.kind === 'admin_token') return p.tenantId === tenantId ? 'owner' : null;
  return null;
}

export function requireAuthenticated(p: Principal): asserts p is Exclude<Principal, { kind: 'anonymous' }> {
  if (p.kind === 'anonymous') throw new ServiceError('unauthenticated', 'log in or send an admin token');
}

/**
 * Every tenant-scoped read and write goes through here. A tenant the caller does not belong to is
 * reported as not found (not forbidden), so IDs of other tenants cannot be probed.
 */
export function requireTenantRole(p: Principal, tenantId: string, min: TenantRole = 'member'): void {
  requireAuthenticated(p);
  checkRole(roleIn(p, tenantId), min);
}

/** Refuses a caller whose `role` in a tenant (null: none) is below `min`: another tenant is "not found". */
export function checkRole(role: TenantRole | null, min: TenantRole): void {
  if (role === null) throw new ServiceError('not_found', 'tenant not found');
  if (min === 'owner' && role !== 'owner') throw new ServiceError('forbidden', 'this needs the tenant owner role');
}

export function requirePlatformAdmin(p: Principal): void {
  requireAuthenticated(p);
  if (!isPlatformAdmin(p)) throw new ServiceError('forbidden', 'this needs a platform admin');
}

/**
 * Inference keys: members create and list their tenant's keys and revoke the ones they created;
 * owners (and platform admins, tenant admin tokens) revoke any. Returns the creator a revoke must
 * be limited to, or undefined for "any key of the tenant".
 */
export function keyRevokeLimit(p: Principal, tenantId: string): string | undefined {
  requireTenantRole(p, tenantId, 'member');
  if (roleIn(p, tenantId) === 'owner') return undefined;
  return p.kind === 'user' ? p.userId : undefined;
}
