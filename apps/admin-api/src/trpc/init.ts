import { initTRPC, TRPCError } from '@trpc/server';
import { z } from 'zod';
import { asServiceError, ServiceError, type ServiceErrorCode } from '../errors.ts';
import { requireAuthenticated, requirePlatformAdmin, requireTenantRole, roleIn } from '../modules/access/access.ts';
import type { Principal, TenantRole } from '../modules/access/principal.ts';
import type { TrpcContext } from './context.ts';

const t = initTRPC.context<TrpcContext>().create({
  errorFormatter({ shape, error }) {
    // `param` names the offending input field (domain errors and zod issues alike), for forms.
    const cause = error.cause;
    let param: string | null = null;
    if (cause instanceof ServiceError) param = cause.param;
    else if (cause && 'issues' in cause && Array.isArray(cause.issues)) {
      const path = (cause.issues[0] as { path?: readonly PropertyKey[] } | undefined)?.path ?? [];
      param = path.map((p) => (typeof p === 'object' && p !== null && 'key' in p ? String((p as { key: unknown }).key) : String(p))).join('.') || null;
    }
    // Unexpected failures are logged (onError) and never described to the caller.
    const message = error.code === 'INTERNAL_SERVER_ERROR' ? 'Internal server error.' : shape.message;
    return { ...shape, message, data: { ...shape.data, param, stack: undefined } };
  },
});

const TRPC_CODE: Readonly<Record<ServiceErrorCode, TRPCError['code']>> = Object.freeze({
  not_found: 'NOT_FOUND',
  conflict: 'CONFLICT',
  invalid: 'BAD_REQUEST',
  forbidden: 'FORBIDDEN',
  unauthenticated: 'UNAUTHORIZED',
  rate_limited: 'TOO_MANY_REQUESTS',
});

/**
 * Domain errors (and database data exceptions, which are bad input) become tRPC errors with their
 * (safe) message; anything else stays a masked 500.
 */
const serviceErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok) {
    const cause = asServiceError(result.error.cause);
    if (cause) throw new TRPCError({ code: TRPC_CODE[cause.code], message: cause.message, cause });
  }
  return result;
});

/**
 * CSRF defence on every mutation a browser could be tricked into sending: when the request carries
 * a session cookie, its Origin (or Referer) must be this host or an allowed console origin. Login
 * is checked too when a browser sent an Origin (login CSRF). Admin-token (Bearer) calls skip it.
 */
const originGuard = t.middleware(({ ctx, type, path, next }) => {
  if (type === 'mutation' && ctx.authVia !== 'bearer' && !ctx.sameOrigin) {
    const cookieCall = ctx.sessionCookieSent || ctx.authVia === 'cookie';
    const browserLogin = path === 'auth.login' && ctx.originSent;
    if (cookieCall || browserLogin) {
      throw new TRPCError({ code: 'FORBIDDEN', message: 'cross-origin request refused (Origin does not match this console)' });
    }
  }
  return next();
});

export const router = t.router;
export const middleware = t.middleware;
export const createCallerFactory = t.createCallerFactory;

/** Anyone (anonymous included); the catalog and login use it. */
export const publicProcedure = t.procedure.use(serviceErrors).use(originGuard);

type Authenticated = Exclude<Principal, { kind: 'anonymous' }>;

/** A logged-in user or a valid admin token. */
export const authedProcedure = publicProcedure.use(({ ctx, next }) => {
  const principal = ctx.principal;
  requireAuthenticated(principal);
  return next({ ctx: { principal: principal as Authenticated } });
});

/** A platform admin (user flag or platform-wide admin token). */
export const adminProcedure = authedProcedure.use(({ ctx, next }) => {
  requirePlatformAdmin(ctx.principal);
  return next();
});

export const tenantIdInput = z.object({ tenantId: z.uuid() });

/**
 * Tenant-scoped: the input carries `tenantId` and the caller must belong to it (any role); a
 * tenant of someone else is "not found". Procedures needing the owner role call `requireOwner`.
 */
export const tenantProcedure = authedProcedure.input(tenantIdInput).use(({ ctx, input, next }) => {
  requireTenantRole(ctx.principal, input.tenantId, 'member');
  const role = roleIn(ctx.principal, input.tenantId) as TenantRole;
  return next({ ctx: { tenantId: input.tenantId, role } });
});

/** Owner check inside a tenant procedure. */
export function requireOwner(ctx: { principal: Principal; tenantId: string }): void {
  requireTenantRole(ctx.principal, ctx.tenantId, 'owner');
}
