import { initTRPC, TRPCError } from '@trpc/server';
import { z } from 'zod';
import { formatTrpcError, toTrpcError } from '../error-mapping.ts';
import { requireAuthenticated, requirePlatformAdmin } from '../modules/access/access.ts';
import type { Principal } from '../modules/access/principal.ts';
import { csrfRefusal } from '../modules/auth/request-caller.ts';
import type { TrpcContext } from './context.ts';

/** A procedure's `points`: what one call costs the caller's work budget (default 1). */
export interface ProcedureMeta {
  readonly points?: number;
}

const t = initTRPC.context<TrpcContext>().meta<ProcedureMeta>().create({ errorFormatter: formatTrpcError });

/** Domain errors (and database data exceptions) keep their safe message; anything else stays a masked 500. */
const serviceErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok) {
    const mapped = toTrpcError(result.error.cause);
    if (mapped && mapped !== result.error) throw mapped;
  }
  return result;
});

/**
 * Procedures that check a password. Each call is one counted guess (see `LoginThrottle`), so a
 * batch of them in one HTTP request is refused as a whole: a batch could otherwise carry dozens of
 * guesses past a throttle that reacts between requests.
 */
const CREDENTIAL_PROCEDURES: ReadonlySet<string> = new Set(['auth.login', 'auth.changePassword']);

/**
 * Every call, before its procedure runs: credential procedures alone in their request; the CSRF
 * decision (`csrfRefusal`, the same one GraphQL applies); the caller's work budget.
 */
const requestGuard = t.middleware(({ ctx, type, path, meta, next }) => {
  const credential = CREDENTIAL_PROCEDURES.has(path);
  if (credential && ctx.batchSize > 1) {
    throw new TRPCError({ code: 'BAD_REQUEST', message: `${path} cannot be batched: send it in a request of its own` });
  }
  // The budget first: a refused call cost a session lookup too (GraphQL charges before its CSRF check as well).
  try {
    ctx.rateLimit?.take(ctx.principal, ctx.ip, meta?.points ?? 1);
  } catch (err) {
    throw toTrpcError(err) ?? err;
  }
  const refusal = csrfRefusal(ctx.caller, { mutation: type === 'mutation', credential });
  if (refusal) throw toTrpcError(refusal) ?? refusal;
  return next();
});

export const router = t.router;
export const middleware = t.middleware;
export const createCallerFactory = t.createCallerFactory;

/** Anyone (anonymous included); the catalog and login use it. */
export const publicProcedure = t.procedure.use(serviceErrors).use(requestGuard);

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
 * Tenant-scoped: the input carries `tenantId`, passed on as `ctx.tenantId`. Whether the caller may act on
 * that tenant (membership, owner-only rules) is decided by the service each procedure calls, with the
 * principal: the one home of those rules for tRPC and GraphQL alike.
 */
export const tenantProcedure = authedProcedure.input(tenantIdInput).use(({ input, next }) => next({ ctx: { tenantId: input.tenantId } }));
