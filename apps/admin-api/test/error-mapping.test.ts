import { describe, expect, it } from 'vitest';
import { createGraphQLError } from 'graphql-yoga';
import { maskGraphQLError } from '../src/error-mapping.ts';

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
