import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../../db.ts';
import { ServiceError } from '../../errors.ts';
import type { Principal } from '../access/principal.ts';
import { classifyOrigin } from './origin.ts';
import { resolveCaller } from './resolve-principal.ts';
import { blankSessionCookie, sessionCookie } from './sessions.ts';

/**
 * The caller of one HTTP request, resolved the same way for every transport (tRPC, GraphQL, plain
 * routes): credentials, session renewal, a stale cookie cleared, and where the request comes from.
 *
 * Forwarded headers (X-Forwarded-Host/Proto/For) count only when the app was built with a trusted
 * proxy (TRUST_PROXY): Fastify's `req.host`, `req.protocol` and `req.ip` apply that rule, so they
 * are the only request facts read here.
 */
export interface RequestCaller {
  readonly principal: Principal;
  /** How the caller authenticated: 'cookie' calls get the CSRF check, 'bearer' (admin token) not. */
  readonly via: 'cookie' | 'bearer' | 'none';
  /** A session cookie was sent (valid or not). */
  readonly sessionCookieSent: boolean;
  /** The Origin (or Referer) against this server's public origin and the console origins. */
  readonly origin: 'same' | 'foreign' | 'absent';
  /** Client address (the proxy's, unless the proxy is trusted). */
  readonly ip: string;
  /** Came over HTTPS (or through a trusted TLS-terminating proxy): cookies get `Secure`. */
  readonly secure: boolean;
  setSessionCookie(token: string, expiresAt: Date): void;
  clearSessionCookie(): void;
}

export interface RequestCallerOptions {
  readonly db: Db;
  /** Normalised console origins trusted besides this server's own public origin. */
  readonly consoleOrigins: readonly string[];
}

/** This server's own origin as the browser sees it (Host cannot be set by a page's script). */
export const ownOrigin = (req: FastifyRequest): string => `${req.protocol}://${req.host}`.toLowerCase();

/**
 * Resolves the caller of `req`: Bearer `infa_…` (a bad one is an `unauthenticated` error, never a
 * silent fallback), else the session cookie (renewed when past half its life; cleared when it names
 * no live session), else anonymous.
 */
export async function resolveRequestCaller(opts: RequestCallerOptions, req: FastifyRequest, reply: FastifyReply): Promise<RequestCaller> {
  const secure = req.protocol === 'https';
  const caller = await resolveCaller(opts.db, { cookieHeader: req.headers.cookie, authorization: req.headers.authorization });
  const setSessionCookie = (token: string, expiresAt: Date): void => void reply.header('set-cookie', sessionCookie(token, expiresAt, secure));
  const clearSessionCookie = (): void => void reply.header('set-cookie', blankSessionCookie(secure));
  if (caller.renewed) setSessionCookie(caller.renewed.token, caller.renewed.session.expiresAt);
  else if (caller.sessionCookieSent && caller.via === 'none') clearSessionCookie();
  return {
    principal: caller.principal,
    via: caller.via,
    sessionCookieSent: caller.sessionCookieSent,
    origin: classifyOrigin(req.headers, [ownOrigin(req), ...opts.consoleOrigins]),
    ip: req.ip,
    secure,
    setSessionCookie,
    clearSessionCookie,
  };
}

/** What the CSRF decision needs to know about the operation. */
export interface OperationKind {
  readonly mutation: boolean;
  /** Login and other credential procedures: a browser's foreign-origin login is login CSRF. */
  readonly credential?: boolean;
}

/**
 * The one CSRF decision (tRPC and GraphQL): the refusal for this caller and operation, or
 * undefined. Admin tokens never ride along with a browser, so Bearer calls pass. A cookie-
 * authenticated call from a foreign origin (another port, a sibling subdomain, `Origin: null`) is
 * refused, reads included; a cookie mutation with neither Origin nor Referer too (browsers send
 * Origin on every POST). A foreign-origin login is refused even without a cookie.
 */
export function csrfRefusal(caller: Pick<RequestCaller, 'via' | 'sessionCookieSent' | 'origin'>, op: OperationKind): ServiceError | undefined {
  if (caller.via === 'bearer' || caller.origin === 'same') return undefined;
  const cookie = caller.via === 'cookie' || caller.sessionCookieSent;
  const refuse = caller.origin === 'foreign' ? caller.via === 'cookie' || (op.mutation && (cookie || op.credential === true)) : op.mutation && cookie;
  if (!refuse) return undefined;
  return new ServiceError(
    'forbidden',
    caller.origin === 'foreign'
      ? 'cross-origin request refused (Origin does not match this console): use the console, or an admin token'
      : 'cross-origin request refused (no Origin or Referer): send an Origin of this console, or use an admin token',
  );
}
