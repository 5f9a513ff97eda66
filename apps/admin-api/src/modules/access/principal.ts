import type { Actor } from '../audit/audit.service.ts';

export type TenantRole = 'owner' | 'member';

/** Who is calling the control plane; both transports (tRPC, GraphQL) resolve one per request. */
export type Principal =
  | { readonly kind: 'anonymous' }
  | {
      readonly kind: 'user';
      readonly userId: string;
      readonly email: string;
      readonly isPlatformAdmin: boolean;
      /** tenantId -> role, read when the session was resolved. */
      readonly memberships: ReadonlyMap<string, TenantRole>;
      /** SHA-256 of the session token (for logout), never the token. */
      readonly sessionId: string;
    }
  | {
      readonly kind: 'admin_token';
      readonly tokenId: string;
      /** The user who created the token, if any. */
      readonly userId: string | null;
      /** null: platform-wide (acts as a platform admin); otherwise the one tenant it may manage, as owner. */
      readonly tenantId: string | null;
    };

export const ANONYMOUS: Principal = Object.freeze({ kind: 'anonymous' });

/** The audit actor of a principal. */
export function actorOf(p: Principal): Actor {
  if (p.kind === 'user') return { userId: p.userId };
  if (p.kind === 'admin_token') return { userId: p.userId, tokenId: p.tokenId };
  return {};
}
