import type { FastifyBaseLogger } from 'fastify';
import type { LoggerOptions } from 'pino';

/**
 * Pino options of the data plane: secrets redacted wherever a header object could be logged. Bodies
 * (prompts, completions) are never passed to the logger at all.
 */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'headers.authorization',
        'headers.cookie',
        'authorization',
        'apiKey',
        'upstream.authorization',
      ],
      censor: '[redacted]',
    },
  };
}

/**
 * The one info line per request: ids, labels, status and timings; never a key, URL query or body. `log` is the node's
 * logger, not a request's child (`req.log` already binds `reqId`: the line would carry the key twice).
 */
export function logRequest(
  log: FastifyBaseLogger,
  reqId: string,
  route: string | undefined,
  mode: string | undefined,
  endpoint: string,
  status: number,
  ms: number,
  extra?: { promptTokens: number; completionTokens: number; ttftMs: number | null },
): void {
  log.info({ reqId, route: route ?? 'unknown', mode: mode ?? 'none', endpoint, status, ms: Math.round(ms * 100) / 100, ...extra }, 'request');
}
