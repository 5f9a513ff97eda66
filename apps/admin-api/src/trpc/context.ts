import { TRPCError } from '@trpc/server';
import type { CreateFastifyContextOptions } from '@trpc/server/adapters/fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { PublicUrls } from '@infer/shared';
import type { Db } from '../db.ts';
import { ServiceError } from '../errors.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../modules/deployments/deployments-context.ts';
import { ANONYMOUS, type Principal } from '../modules/access/principal.ts';
import { createLoginThrottle, type LoginThrottle } from '../modules/auth/login-throttle.ts';
import { hasOriginHeader, isSameOrigin } from '../modules/auth/origin.ts';
import { resolveCaller } from '../modules/auth/resolve-principal.ts';
import { blankSessionCookie, sessionCookie } from '../modules/auth/sessions.ts';

// The URL rules are shared with the console; re-exported for the app's existing importers.
export type { PublicUrls };

/** The HTTP side of a call: absent for in-process callers (tests, scripts). */
export interface TrpcHttp {
  readonly req: FastifyRequest;
  readonly reply: FastifyReply;
  /** The request came over HTTPS (protocol or X-Forwarded-Proto): cookies get `Secure`. */
  readonly secure: boolean;
}

export interface TrpcContext {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
  /** The deployment service's dependencies (provisioners, reconciler), built once by the app. */
  readonly deployments: DeploymentsContext;
  /** Who is calling (see `resolvePrincipal`). */
  readonly principal: Principal;
  /** How: 'cookie' mutations must pass the origin check; 'bearer' (admin token) skips it. */
  readonly authVia: 'cookie' | 'bearer' | 'none';
  /** The request carried a session cookie (valid or not). */
  readonly sessionCookieSent: boolean;
  /** The Origin / Referer names this host or an allowed console origin. */
  readonly sameOrigin: boolean;
  /** An Origin or Referer header was sent at all. */
  readonly originSent: boolean;
  /** Client IP (login throttling). */
  readonly ip: string;
  readonly loginThrottle: LoginThrottle;
  /** Sets the session cookie on the response (no-op without HTTP). */
  setSessionCookie(token: string, expiresAt: Date): void;
  /** Clears the session cookie on the response (no-op without HTTP). */
  clearSessionCookie(): void;
  readonly http?: TrpcHttp;
}

export interface InnerContextOptions {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
  /** Default: no provisioners (deploys are refused; lists and deletes work). */
  readonly deployments?: DeploymentsContext;
  readonly principal?: Principal;
  readonly authVia?: TrpcContext['authVia'];
  readonly sameOrigin?: boolean;
  readonly ip?: string;
  readonly loginThrottle?: LoginThrottle;
  readonly http?: TrpcHttp;
}

/** The context without HTTP: tests and server-side callers build it directly (same-origin, anonymous by default). */
export async function createContextInner(opts: InnerContextOptions): Promise<TrpcContext> {
  const { http } = opts;
  return {
    db: opts.db,
    publicUrls: opts.publicUrls,
    deployments: opts.deployments ?? createDeploymentsContext({ db: opts.db, provisioners: {} }),
    principal: opts.principal ?? ANONYMOUS,
    authVia: opts.authVia ?? (opts.principal?.kind === 'admin_token' ? 'bearer' : opts.principal?.kind === 'user' ? 'cookie' : 'none'),
    sessionCookieSent: opts.principal?.kind === 'user',
    sameOrigin: opts.sameOrigin ?? true,
    originSent: true,
    ip: opts.ip ?? 'local',
    loginThrottle: opts.loginThrottle ?? createLoginThrottle(),
    setSessionCookie(token, expiresAt) {
      http?.reply.header('set-cookie', sessionCookie(token, expiresAt, http.secure));
    },
    clearSessionCookie() {
      http?.reply.header('set-cookie', blankSessionCookie(http.secure));
    },
    ...(http ? { http } : {}),
  };
}

export interface ContextFactoryOptions {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
  readonly deployments: DeploymentsContext;
  /** Origins besides the request's own host allowed to send cookie-authenticated mutations. */
  readonly consoleOrigins?: readonly string[];
  readonly loginThrottle?: LoginThrottle;
}

const firstHeader = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/** The request came over HTTPS, directly or through a TLS-terminating proxy (X-Forwarded-Proto). */
export function isHttps(req: FastifyRequest): boolean {
  const forwarded = firstHeader(req.headers['x-forwarded-proto'])?.split(',')[0]?.trim().toLowerCase();
  return forwarded ? forwarded === 'https' : req.protocol === 'https';
}

/** The per-request factory for the Fastify adapter: resolves the principal from cookie or Bearer. */
export function createContextFactory(opts: ContextFactoryOptions) {
  const loginThrottle = opts.loginThrottle ?? createLoginThrottle();
  const allowed = opts.consoleOrigins ?? [];
  return async ({ req, res }: CreateFastifyContextOptions): Promise<TrpcContext> => {
    const http: TrpcHttp = { req, reply: res, secure: isHttps(req) };
    let caller;
    try {
      caller = await resolveCaller(opts.db, { cookieHeader: req.headers.cookie, authorization: req.headers.authorization });
    } catch (err) {
      if (err instanceof ServiceError) throw new TRPCError({ code: 'UNAUTHORIZED', message: err.message, cause: err });
      throw err;
    }
    const ctx = await createContextInner({
      db: opts.db,
      publicUrls: opts.publicUrls,
      deployments: opts.deployments,
      principal: caller.principal,
      authVia: caller.via,
      sameOrigin: isSameOrigin(req.headers, allowed),
      ip: req.ip,
      loginThrottle,
      http,
    });
    if (caller.renewed) ctx.setSessionCookie(caller.renewed.token, caller.renewed.session.expiresAt);
    else if (caller.sessionCookieSent && caller.via === 'none') ctx.clearSessionCookie();
    return { ...ctx, sessionCookieSent: caller.sessionCookieSent, originSent: hasOriginHeader(req.headers) };
  };
}
