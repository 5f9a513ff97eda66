import { describe, expect, it } from 'vitest';
import { createGraphQLError } from 'graphql-yoga';
import { maskGraphQLError } from '../src/error-mapping.ts';
import { asServiceError } from '../src/errors.ts';

describe('maskGraphQLError', () => {
  it("drops the internal originalError Yoga's request parsers put into extensions, keeping the rest", () => {
    const parserError = createGraphQLError('POST body sent invalid JSON.', {
      extensions: { code: 'BAD_REQUEST', http: { status: 400 }, originalError: { name: 'SyntaxError', message: 'Unexpected end of JSON input' } },
    });
    const shown = maskGraphQLError(parserError, 'Unexpected error.') as ReturnType<typeof createGraphQLError>;
    expect(shown.message).toBe('POST body sent invalid JSON.');
    expect(shown.extensions).toEqual({ code: 'BAD_REQUEST', http: { status: 400 } });
    expect(JSON.stringify(shown)).not.toMatch(/originalError|SyntaxError/);
  });
});

describe('an unreachable database', () => {
  it('is a 503 with Retry-After for every way node-postgres says so, and nothing else is', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const unavailable = [
      refused,
      new AggregateError([refused, Object.assign(new Error('connect ECONNREFUSED ::1:5432'), { code: 'ECONNREFUSED' })], ''),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
      Object.assign(new Error('connection failure'), { code: '08006' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
    ];
    for (const err of unavailable) {
      const mapped = asServiceError(err);
      expect(mapped?.status, err.message).toBe(503);
      expect(mapped?.retryAfterS).toBe(2);
      expect(mapped?.toBody().error).toMatchObject({ code: 'service_unavailable', type: 'api_error' });
    }
    const notUnavailable = [
      new Error('boom'),
      Object.assign(new Error('duplicate key'), { code: '23505' }),
      Object.assign(new Error('syntax error'), { code: '42601' }),
      new AggregateError([refused, new Error('boom')], ''),
    ];
    for (const err of notUnavailable) expect(asServiceError(err)?.status, err.message).not.toBe(503);
  });
});
