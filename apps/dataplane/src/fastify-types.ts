import type { ResolvedKey } from './config/config-view.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** URL of the internal metrics listener once bound (null: none configured, or not bound yet). */
    metricsUrl(): string | null;
    /** Chat requests in flight on this node now. */
    inFlightNow(): number;
    /**
     * Stops every chat call in flight (a stream ends with an error event, an answer not started is a 503), each with
     * its usage record, and closes the connections whose request's body is still coming: for a shutdown whose drain
     * time ran out. Answers how many calls and uploads there were.
     */
    stopInFlight(): number;
    /** Client connections the node's own HTTP/1.1 front holds now (src/front; 0 with the front off). */
    frontConnections(): number;
  }
  interface FastifyRequest {
    /** The caller's key, set by the auth hook of the inference routes. */
    apiKey: ResolvedKey | null;
    /** Endpoint label for metrics ('' before routing); null when the chat handler counts the request itself. */
    metricEndpoint: string | null;
  }
  interface FastifyContextConfig {
    /** Metric labels of the route. */
    metricRoute?: string;
    metricMode?: string;
  }
}
