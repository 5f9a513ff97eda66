import type { FastifyReply, FastifyRequest } from 'fastify';
import { parse } from 'graphql';
import { createGraphQLError, createYoga, type Plugin } from 'graphql-yoga';
import type { PublicUrls } from '@infer/shared';
import type { Db } from '../db.ts';
import { maskGraphQLError, toGraphQLError } from '../error-mapping.ts';
import { asServiceError } from '../errors.ts';
import { createPrincipalRateLimit, type PrincipalRateLimit } from '../modules/auth/principal-rate-limit.ts';
import { csrfRefusal, resolveRequestCaller, type RequestCaller } from '../modules/auth/request-caller.ts';
import type { DeploymentsContext } from '../modules/deployments/deployments-context.ts';
import { useDepthLimit } from './depth-limit.ts';
import { DEFAULT_GRAPHQL_LIMITS, type GraphQLContext, type GraphQLLimits } from './context.ts';
import { operationSize, useOperationSizeLimit } from './operation-limits.ts';
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
  /**
   * Console origins (normalised): the only foreign origins that get credentialed CORS, and that may
   * send cookie-authenticated operations besides this server's own origin.
   */
  readonly allowedOrigins?: readonly string[];
  /** Per-principal work budget (shared with tRPC when the app passes one). */
  readonly rateLimit?: PrincipalRateLimit;
}

type UserContext = GraphQLContext & { caller: RequestCaller };
type Context = UserContext & ServerContext;

/** Fields per rate-limit point: a small query costs 1, a wide one more. */
const FIELDS_PER_POINT = 25;

/** Points of a rate-limit bucket an operation of `fields` fields costs (at least 1). */
const pointsOf = (fields: number): number => Math.max(1, Math.ceil(fields / FIELDS_PER_POINT));

/**
 * The caller of each request, resolved once, before its document is parsed (`callerOf` resolves it or returns the one
 * already resolved; the context reuses it, so a session is looked up and renewed once).
 */
function createCallers(opts: GraphQLServerOptions & { readonly allowed: readonly string[] }) {
  const callers = new WeakMap<FastifyRequest, Promise<RequestCaller>>();
  return (req: FastifyRequest, reply: FastifyReply): Promise<RequestCaller> => {
    let caller = callers.get(req);
    if (caller === undefined) {
      caller = resolveRequestCaller({ db: opts.db, consoleOrigins: opts.allowed }, req, reply);
      callers.set(req, caller);
    }
    return caller;
  };
}

/**
 * The caller's work budget and the CSRF decision (the one tRPC applies too). One point is charged before the document
 * is parsed, so documents refused at parse or validation cost the caller as much as the smallest query; an operation
 * that executes is charged the rest of its size's points.
 */
function requestGuard(limits: GraphQLLimits, rateLimit: PrincipalRateLimit, callerOf: ReturnType<typeof createCallers>): Plugin<Context, ServerContext> {
  return {
    async onParams({ context, setResult }) {
      try {
        const caller = await callerOf(context.req, context.reply);
        rateLimit.take(caller.principal, caller.ip, 1);
      } catch (err) {
        const domain = asServiceError(err);
        if (!domain) throw err;
        setResult({ errors: [toGraphQLError(domain, undefined, true)] });
      }
    },
    onExecute({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue;
      let mutation = false;
      for (const d of args.document.definitions) {
        if (d.kind === 'OperationDefinition' && (!args.operationName || d.name?.value === args.operationName)) {
          mutation = d.operation === 'mutation';
          break;
        }
      }
      try {
        const refusal = csrfRefusal(ctx.caller, { mutation });
        if (refusal) throw refusal;
        const size = operationSize(args.document, args.operationName, limits.maxFields);
        const rest = pointsOf(size.fields) - 1; // one point was taken before parsing
        if (rest > 0) rateLimit.take(ctx.principal, ctx.caller.ip, rest);
      } catch (err) {
        const domain = asServiceError(err);
        if (!domain) throw err;
        setResultAndStopExecution({ errors: [toGraphQLError(domain, undefined, true)] });
      }
    },
  };
}

/**
 * Every error names the argument it is about in `extensions.param` (null: none), as the README's error shape says:
 * the service errors do; graphql's and Yoga's own (parse, validation, a request without a query) name none, and get
 * `param: null` here, just before the answer is written, whichever phase produced them.
 */
function useErrorParams(): Plugin<Context> {
  return {
    onResultProcess({ result, setResult }) {
      if (Array.isArray(result) || Symbol.asyncIterator in result) return; // no batching; subscriptions are not offered
      const errors = result.errors;
      if (errors === undefined || errors.every((e) => e.extensions !== undefined && 'param' in e.extensions && 'code' in e.extensions)) return;
      setResult({
        ...result,
        errors: errors.map((e) =>
          createGraphQLError(e.message, {
            nodes: e.nodes,
            source: e.source,
            positions: e.positions,
            path: e.path,
            extensions: { ...e.extensions, code: e.extensions?.['code'] ?? 'invalid', param: e.extensions?.['param'] ?? null },
          }),
        ),
      });
    },
  };
}

/** Most tokens a document may have: the parser stops there, before a huge or deeply nested document costs time or stack. */
export const MAX_DOCUMENT_TOKENS = 20_000;

/**
 * Parses with a token cap (graphql-js `maxTokens`), and answers a document nested past the parser's stack with a 400
 * `query_too_deep` rather than an internal error: the depth limit runs after parsing, too late for that.
 */
function useParseLimit(): Plugin {
  return {
    onParse({ setParseFn }) {
      setParseFn((source, options) => {
        try {
          return parse(source, { ...options, maxTokens: MAX_DOCUMENT_TOKENS });
        } catch (err) {
          if (err instanceof RangeError) {
            throw createGraphQLError('The query is nested too deeply to parse.', { extensions: { code: 'query_too_deep', http: { status: 400 } } });
          }
          throw err;
        }
      });
    },
  };
}

/** The Yoga instance behind `/graphql`: resolves the caller per request, masks unexpected errors. */
export function createGraphQLServer(opts: GraphQLServerOptions) {
  const limits: GraphQLLimits = Object.freeze({ ...DEFAULT_GRAPHQL_LIMITS, ...opts.limits });
  const allowed = opts.allowedOrigins ?? [];
  const rateLimit = opts.rateLimit ?? createPrincipalRateLimit();
  const callerOf = createCallers({ ...opts, allowed });
  return createYoga<ServerContext, UserContext>({
    schema,
    graphqlEndpoint: '/graphql',
    logging: false,
    landingPage: false,
    // No GraphiQL page: every answer on /graphql is GraphQL-shaped JSON (an HTML page is no answer to a caller).
    graphiql: false,
    // Yoga's parse cache keeps up to 1,024 documents by their full text, refused ones included: unique 1 MiB
    // documents of many fragments filled the heap in about 110 anonymous requests. Documents are parsed per request.
    parserAndValidationCache: false,
    // Yoga's default reflects any Origin with credentials; only the configured consoles get CORS.
    cors: (request) => {
      const origin = request.headers.get('origin');
      if (origin === null || !allowed.includes(origin.toLowerCase())) return false;
      return { origin: [origin], credentials: true, methods: ['GET', 'POST'], allowedHeaders: ['content-type', 'authorization'] };
    },
    plugins: [useParseLimit(), useDepthLimit(limits), useOperationSizeLimit(limits), requestGuard(limits, rateLimit, callerOf), useErrorParams()],
    context: async ({ req, reply }) => {
      let caller: RequestCaller;
      try {
        caller = await callerOf(req, reply);
      } catch (err) {
        const domain = asServiceError(err);
        throw domain ? toGraphQLError(domain, undefined, true) : err;
      }
      const memo = new Map<string, Promise<unknown>>();
      const charge = (points: number): void => rateLimit.take(caller.principal, caller.ip, points);
      return { db: opts.db, principal: caller.principal, caller, publicUrls: opts.publicUrls, deployments: opts.deployments, limits, memo, charge };
    },
    maskedErrors: { maskError: (error, message) => maskGraphQLError(error, message, opts.onUnexpectedError) },
  });
}
