import { initTRPC, TRPCError } from '@trpc/server';
import { ServiceError, type ServiceErrorCode } from '../errors.ts';
import type { TrpcContext } from './context.ts';

const t = initTRPC.context<TrpcContext>().create();

const TRPC_CODE: Readonly<Record<ServiceErrorCode, TRPCError['code']>> = Object.freeze({
  not_found: 'NOT_FOUND',
  conflict: 'CONFLICT',
  invalid: 'BAD_REQUEST',
  forbidden: 'FORBIDDEN',
  unauthenticated: 'UNAUTHORIZED',
});

/** Domain errors become tRPC errors with their (safe) message; anything else stays a masked 500. */
const serviceErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok && result.error.cause instanceof ServiceError) {
    const cause = result.error.cause;
    throw new TRPCError({ code: TRPC_CODE[cause.code], message: cause.message, cause });
  }
  return result;
});

export const router = t.router;
export const middleware = t.middleware;
export const createCallerFactory = t.createCallerFactory;
export const publicProcedure = t.procedure.use(serviceErrors);
