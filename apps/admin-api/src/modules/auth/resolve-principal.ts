import type { Db } from '../../db.ts';
import { ServiceError } from '../../errors.ts';
import { ANONYMOUS, type Principal, type TenantRole } from '../access/principal.ts';
import { authenticateAdminToken } from './admin-tokens.service.ts';
import { readSessionToken, validateSession, type Session } from './sessions.ts';

export interface CallerCredentials {
  /** The raw `Cookie` header. */
  readonly cookieHeader?: string;
  /** The raw `Authorization` header. */
  readonly authorization?: string;
}

export interface ResolvedCaller {
  readonly principal: Principal;
  /** How the caller authenticated; cookie-authenticated mutations need a matching Origin. */
  readonly via: 'cookie' | 'bearer' | 'none';
  /** Set when a session cookie was sent (valid or not). */
  readonly sessionCookieSent: boolean;
  /** The session, when it was renewed by this request (re-send the cookie). */
  readonly renewed?: { readonly token: string; readonly session: Session };
}

/** The Bearer credential of an Authorization header, or undefined for none / another scheme. */
function bearerOf(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (m?.[1]) return m[1];
  if (/^Bearer\s*$/i.test(authorization)) throw new ServiceError('unauthenticated', 'the Bearer credential is empty');
  if (/^Bearer\b/i.test(authorization)) throw new ServiceError('unauthenticated', 'the Bearer credential must be one token, without spaces');
  return undefined;
}

async function membershipsOf(db: Db, userId: string): Promise<Map<string, TenantRole>> {
  const rows = await db.selectFrom('memberships').select(['tenantId', 'role']).where('userId', '=', userId).execute();
  return new Map(rows.map((r) => [r.tenantId, r.role]));
}

/**
 * Resolves the caller with the details the transports need (cookie renewal, origin-check mode).
 * A Bearer credential wins over a cookie; a bad Bearer is an error, never a silent fallback.
 */
export async function resolveCaller(db: Db, creds: CallerCredentials): Promise<ResolvedCaller> {
  const bearer = bearerOf(creds.authorization);
  const token = readSessionToken(creds.cookieHeader);
  if (bearer !== undefined) {
    if (!bearer.startsWith('infa_')) {
      throw new ServiceError('unauthenticated', 'the control plane takes admin tokens (infa_…) as Bearer, not inference keys');
    }
    const id = await authenticateAdminToken(db, bearer);
    return {
      principal: { kind: 'admin_token', tokenId: id.tokenId, userId: id.userId, tenantId: id.tenantId },
      via: 'bearer',
      sessionCookieSent: token !== undefined,
    };
  }
  if (token !== undefined) {
    const validated = await validateSession(db, token);
    if (!validated) return { principal: ANONYMOUS, via: 'none', sessionCookieSent: true };
    const { user, session } = validated;
    return {
      principal: {
        kind: 'user',
        userId: user.id,
        email: user.email,
        isPlatformAdmin: user.isPlatformAdmin,
        memberships: await membershipsOf(db, user.id),
        sessionId: session.id,
      },
      via: 'cookie',
      sessionCookieSent: true,
      ...(validated.renewed ? { renewed: { token, session } } : {}),
    };
  }
  return { principal: ANONYMOUS, via: 'none', sessionCookieSent: false };
}

/**
 * The ONE place both transports resolve the caller: Bearer `infa_…` -> admin token principal
 * (revoked / expired / unknown -> `unauthenticated` error), session cookie -> user principal with
 * memberships, else anonymous. An expired or unknown session cookie is anonymous.
 */
export async function resolvePrincipal(db: Db, creds: CallerCredentials): Promise<Principal> {
  return (await resolveCaller(db, creds)).principal;
}
