import type { CreateFastifyContextOptions } from '@trpc/server/adapters/fastify';
import type { PublicUrls } from '@infer/shared';
import type { Db } from '../db.ts';
import { toTrpcError } from '../error-mapping.ts';
import { createDeploymentsContext, type DeploymentsContext } from '../modules/deployments/deployments-context.ts';
import { ANONYMOUS, type Principal } from '../modules/access/principal.ts';
import { createLoginThrottle, type LoginThrottle } from '../modules/auth/login-throttle.ts';
import { createPrincipalRateLimit, type PrincipalRateLimit } from '../modules/auth/principal-rate-limit.ts';
import { resolveRequestCaller, type RequestCaller } from '../modules/auth/request-caller.ts';

// The URL rules are shared with the console; re-exported for the app's existing importers.
export type { PublicUrls };

export interface TrpcContext {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
  /** The deployment service's dependencies (provisioners, reconciler), built once by the app. */
  readonly deployments: DeploymentsContext;
  /** Who is calling (see `resolveRequestCaller`). */
  readonly principal: Principal;
  /** The request's caller facts the guards read (credential kind, origin); in-process calls are same-origin. */
  readonly caller: Pick<RequestCaller, 'via' | 'sessionCookieSent' | 'origin'>;
  /** Procedure calls in this HTTP request (credential procedures refuse batches of more than one). */
  readonly batchSize: number;
  /** Client IP (login throttling, anonymous rate limits). */
  readonly ip: string;
  readonly loginThrottle: LoginThrottle;
  /** Per-principal work budget; absent for in-process callers. */
  readonly rateLimit?: PrincipalRateLimit;
  /** Sets the session cookie on the response (no-op without HTTP). */
  setSessionCookie(token: string, expiresAt: Date): void;
  /** Clears the session cookie on the response (no-op without HTTP). */
  clearSessionCookie(): void;
}

export interface InnerContextOptions {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
  /** Default: no provisioners (deploys are refused; lists and deletes work). */
  readonly deployments?: DeploymentsContext;
  readonly principal?: Principal;
  readonly ip?: string;
  readonly loginThrottle?: LoginThrottle;
}

/** The context without HTTP: tests and server-side callers build it directly (same-origin, anonymous by default). */
export async function createContextInner(opts: InnerContextOptions): Promise<TrpcContext> {
  const principal = opts.principal ?? ANONYMOUS;
  const via = principal.kind === 'admin_token' ? 'bearer' : principal.kind === 'user' ? 'cookie' : 'none';
  return {
    db: opts.db,
    publicUrls: opts.publicUrls,
    deployments: opts.deployments ?? createDeploymentsContext({ db: opts.db, provisioners: {} }),
    principal,
    caller: { via, sessionCookieSent: principal.kind === 'user', origin: 'same' },
    batchSize: 1,
    ip: opts.ip ?? 'local',
    loginThrottle: opts.loginThrottle ?? createLoginThrottle(opts.db),
    setSessionCookie() {},
    clearSessionCookie() {},
  };
}

export interface ContextFactoryOptions {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
  readonly deployments: DeploymentsContext;
  /** Normalised console origins trusted besides this server's own origin. */
  readonly consoleOrigins?: readonly string[];
  readonly loginThrottle?: LoginThrottle;
  readonly rateLimit?: PrincipalRateLimit;
}

/** The per-request factory for the Fastify adapter: the caller comes from `resolveRequestCaller`. */
export function createContextFactory(opts: ContextFactoryOptions) {
  const loginThrottle = opts.loginThrottle ?? createLoginThrottle(opts.db);
  const rateLimit = opts.rateLimit ?? createPrincipalRateLimit();
  const callerOptions = { db: opts.db, consoleOrigins: opts.consoleOrigins ?? [] };
  return async ({ req, res, info }: CreateFastifyContextOptions): Promise<TrpcContext> => {
    let caller: RequestCaller;
    try {
      caller = await resolveRequestCaller(callerOptions, req, res);
    } catch (err) {
      throw toTrpcError(err) ?? err;
    }
    return {
      db: opts.db,
      publicUrls: opts.publicUrls,
      deployments: opts.deployments,
      principal: caller.principal,
      caller,
      batchSize: info.calls.length,
      ip: caller.ip,
      loginThrottle,
      rateLimit,
      setSessionCookie: caller.setSessionCookie,
      clearSessionCookie: caller.clearSessionCookie,
    };
  };
}
