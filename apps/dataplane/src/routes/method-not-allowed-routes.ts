import { errorBody } from '@infer/shared';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods, RouteOptions } from 'fastify';

/** The methods a known path answers 405 for when it has no route for them. */
const METHODS: readonly HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

interface KnownPath {
  readonly methods: Set<string>;
  /** The metric label of the path's own routes (its CORS preflight's is 'preflight'): its 405s are counted under it. */
  metricRoute: string | undefined;
}

/** The paths registered on an app and their methods, gathered by an `onRoute` hook added before any route. */
export interface RouteTable {
  readonly paths: ReadonlyMap<string, KnownPath>;
}

/** Adds the `onRoute` hook that fills the table; call it before registering the routes it should see. */
export function collectRoutes(app: FastifyInstance): RouteTable {
  const paths = new Map<string, KnownPath>();
  app.addHook('onRoute', (route: RouteOptions) => {
    let known = paths.get(route.url);
    if (known === undefined) {
      known = { methods: new Set(), metricRoute: undefined };
      paths.set(route.url, known);
    }
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    // A GET on the chat path is a chat request answered 405, not a preflight (CORS registers its OPTIONS first).
    if (known.metricRoute === undefined && methods.some((m) => m !== 'OPTIONS')) known.metricRoute = route.config?.metricRoute;
    for (const m of methods) known.methods.add(m);
    // Fastify adds a HEAD route for each GET once the plugin has loaded (exposeHeadRoutes).
    if (known.methods.has('GET') && route.exposeHeadRoute !== false) known.methods.add('HEAD');
  });
  return { paths };
}

export interface MethodNotAllowedOptions {
  readonly table: RouteTable;
}

/**
 * Register last: every path another route serves answers the methods it does not serve with 405 and an
 * `allow` header (no auth needed to learn that), instead of the unknown-route 404.
 */
export async function methodNotAllowedRoutes(app: FastifyInstance, opts: MethodNotAllowedOptions): Promise<void> {
  for (const [url, known] of [...opts.table.paths]) {
    const missing = METHODS.filter((m) => !known.methods.has(m));
    if (missing.length === 0) continue;
    const allowed = METHODS.filter((m) => known.methods.has(m));
    const allow = allowed.join(', ');
    const message = `Method not allowed: use ${allowed.filter((m) => m !== 'HEAD' && m !== 'OPTIONS').join(' or ')}.`;
    const handler = (_req: FastifyRequest, reply: FastifyReply): void => {
      reply.code(405).header('allow', allow).send(errorBody('method_not_allowed', message));
    };
    // Answered in onRequest, before any body is read: a PUT with an empty or non-JSON body is a 405, not a 400/415/413.
    app.route({
      method: missing,
      url,
      exposeHeadRoute: false,
      config: { metricRoute: known.metricRoute ?? 'unknown', metricMode: 'none' },
      handler,
      onRequest: (req, reply, done) => {
        handler(req, reply);
        done();
      },
    });
  }
}
