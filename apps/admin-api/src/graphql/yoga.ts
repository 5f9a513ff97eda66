import type { FastifyReply, FastifyRequest } from 'fastify';
import { createGraphQLError, createYoga, type Plugin } from 'graphql-yoga';
import type { Db } from '../db.ts';
import { asServiceError, ServiceError } from '../errors.ts';
import { isSameOrigin } from '../modules/auth/origin.ts';
import { resolveCaller } from '../modules/auth/resolve-principal.ts';
import { sessionCookie } from '../modules/auth/sessions.ts';
import type { DeploymentsContext } from '../modules/deployments/deployments-context.ts';
import { isHttps, type PublicUrls } from '../trpc/context.ts';
import { useDepthLimit } from './depth-limit.ts';
import { DEFAULT_GRAPHQL_LIMITS, type GraphQLContext, type GraphQLLimits } from './context.ts';
import { schema } from './schema/index.ts';

interface ServerContext {
  req: FastifyRequest;
  reply: FastifyReply;
}

export interface GraphQLServerOptions {
  readonly db: Db;
  readonly publicUrls: PublicUrls;
  readonly deployments: DeploymentsContext;
  readonly limits?: Partial<GraphQLLimits>;
  /** Where unexpected (masked) errors are reported; callers only see "Unexpected error.". */
  readonly onUnexpectedError?: (err: unknown) => void;
  /** Console origins (normalised) allowed to send cookie-authenticated mutations besides this host. */
  readonly allowedOrigins?: readonly string[];
}

type UserContext = GraphQLContext & { via: 'cookie' | 'bearer' | 'none' };
type Context = UserContext & ServerContext;

const HTTP_STATUS: Readonly<Record<string, number>> = Object.freeze({ unauthenticated: 401 });

/** A ServiceError as a GraphQL error: its (safe) message, code and param; nothing else. */
function fromServiceError(err: ServiceError, path?: readonly (string | number)[]) {
  const status = HTTP_STATUS[err.code];
  return createGraphQLError(err.message, {
    path,
    extensions: { code: err.code, param: err.param, ...(status ? { http: { status } } : {}) },
  });
}

const isGraphQLError = (e: unknown): e is Error & { originalError?: unknown; path?: readonly (string | number)[] } =>
  e instanceof Error && e.name === 'GraphQLError';

/** The innermost cause of a GraphQL error (variable coercion wraps a scalar's error twice), or undefined. */
function rootCause(error: unknown): unknown {
  let cause = isGraphQLError(error) ? error.originalError : undefined;
  while (isGraphQLError(cause) && cause.originalError) cause = cause.originalError;
  return cause;
}

/** Cookie-authenticated mutations must come from this host or an allowed console origin (CSRF). */
function originCheck(allowedOrigins: readonly string[]): Plugin<Context> {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue;
      if (ctx.via !== 'cookie') return;
      let isMutation = false;
      for (const d of args.document.definitions) {
        if (d.kind === 'OperationDefinition' && (!args.operationName || d.name?.value === args.operationName)) {
          isMutation = d.operation === 'mutation';
          break;
        }
      }
      if (!isMutation || isSameOrigin(ctx.req.headers, allowedOrigins)) return;
      setResultAndStopExecution({
        errors: [createGraphQLError('cross-origin mutation refused: send an Origin of this console, or use an admin token', { extensions: { code: 'forbidden' } })],
      });
    },
  };
}

/** The Yoga instance behind `/graphql`: resolves the caller per request, masks unexpected errors. */
export function createGraphQLServer(opts: GraphQLServerOptions) {
  const limits: GraphQLLimits = Object.freeze({ ...DEFAULT_GRAPHQL_LIMITS, ...opts.limits });
  return createYoga<ServerContext, UserContext>({
    schema,
    graphqlEndpoint: '/graphql',
    logging: false,
    landingPage: false,
    plugins: [useDepthLimit(limits), originCheck(opts.allowedOrigins ?? [])],
    context: async ({ req, reply }) => {
      let caller;
      try {
        caller = await resolveCaller(opts.db, {
          cookieHeader: req.headers.cookie,
          authorization: req.headers.authorization,
        });
      } catch (err) {
        throw err instanceof ServiceError ? fromServiceError(err) : err;
      }
      if (caller.renewed) {
        reply.header('set-cookie', sessionCookie(caller.renewed.token, caller.renewed.session.expiresAt, isHttps(req)));
      }
      const memo = new Map<string, Promise<unknown>>();
      return { db: opts.db, principal: caller.principal, via: caller.via, publicUrls: opts.publicUrls, deployments: opts.deployments, limits, memo };
    },
    maskedErrors: {
      maskError: (error, message) => {
        if (error instanceof ServiceError) return fromServiceError(error);
        const path = isGraphQLError(error) ? error.path : undefined;
        const cause = rootCause(error);
        if (cause instanceof ServiceError) {
          // A scalar's ServiceError inside a variable error: graphql's message names the variable, keep it.
          const variableError = !path && isGraphQLError(error) && error.originalError !== cause;
          return fromServiceError(variableError ? new ServiceError(cause.code, (error as Error).message, cause.param) : cause, path);
        }
        // A database data exception (NUL in text, a number or date out of range) is bad input, not a 500.
        const domain = asServiceError(cause);
        if (domain) return fromServiceError(domain, path);
        // Parse, validation and coercion errors are graphql's own (no foreign cause): safe to show.
        if (isGraphQLError(error) && (cause === undefined || isGraphQLError(cause))) return error;
        opts.onUnexpectedError?.(cause ?? error);
        return createGraphQLError(message, { extensions: { code: 'internal_error' } });
      },
    },
  });
}
