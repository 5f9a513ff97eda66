import { chatRequestSchema } from '@infer/shared';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fastChatBody } from '../src/proxy/fast-chat-body.ts';
import { NAME, SECRET_A, deadUrl, makeSnapshot, memorySink, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

let sim: StartedSim;
let dp: StartedApp;

beforeAll(async () => {
  sim = await startSim();
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), memorySink(), { bodyLimit: 16 * 1024 });
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

const printable = (max: number) => fc.stringMatching(new RegExp(`^[!-~][ -~]{0,${max}}$`));
const scalar = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.integer({ min: -5, max: 40 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom('true', 'false', '16', '0.7', ' 8 ', '1e3', 'abc', ''),
);
const messages = fc.oneof(
  fc.array(
    fc.record(
      {
        role: fc.oneof(fc.constantFrom('user', 'system', 'assistant', ''), scalar),
        content: fc.oneof(fc.string({ maxLength: 40 }), scalar, fc.array(scalar, { maxLength: 2 })),
      },
      { requiredKeys: [] },
    ),
    { maxLength: 3 },
  ),
  scalar,
);
/** Bodies near the real shape (each field sometimes wrong), plus arbitrary JSON. */
const chatish = fc.record(
  {
    model: fc.oneof(fc.constant(NAME), fc.constant('dead-model'), fc.constant('nope'), scalar),
    messages,
    stream: fc.oneof(fc.boolean(), scalar),
    max_tokens: fc.oneof(fc.integer({ min: -2, max: 12 }), scalar),
    temperature: scalar,
    top_p: scalar,
    n: fc.oneof(fc.integer({ min: 0, max: 20 }), scalar),
    stop: fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.string({ maxLength: 3 }), { maxLength: 6 }), scalar),
    stream_options: fc.oneof(fc.record({ include_usage: scalar }), scalar),
    seed: scalar,
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  chatish.map((b) => JSON.stringify(b)),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 60 }),
  fc.constantFrom('', '{', '{"messages":', 'null', '[]', '{"model":"x"}'.repeat(2)),
);
const headers = fc.record(
  {
    'content-type': fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/jsonx',
    ),
    authorization: fc.oneof(fc.constant(`Bearer ${SECRET_A}`), fc.constant(`bearer ${SECRET_A}`), printable(30), fc.constant('Bearer ')),
    'x-request-id': printable(200),
  },
  { requiredKeys: ['content-type'] },
);

describe('property: bad input never yields a 5xx or a non-JSON answer', () => {
  it('random bodies and headers on both chat routes', async () => {
    await fc.assert(
      fc.asyncProperty(body, headers, fc.boolean(), async (payload, hdrs, dedicated) => {
        const path = dedicated ? '/funccall/acme/endpoints/llama-3-8b-instruct/v1/chat/completions' : '/endpoints/v1/chat/completions';
        const res = await fetch(`${dp.url}${path}`, { method: 'POST', headers: hdrs, body: payload });
        const text = await res.text();
        expect(res.status, text).toBeLessThan(500);
        if (res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
          expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
          return;
        }
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        const parsed = JSON.parse(text) as { error?: { message?: unknown; type?: unknown } };
        if (res.status >= 400) {
          expect(typeof parsed.error?.message).toBe('string');
          expect(typeof parsed.error?.type).toBe('string');
        }
      }),
      { numRuns: 200 },
    );
  });

  it('the fast body check accepts only what the schema accepts, unchanged', () => {
    fc.assert(
      fc.property(fc.oneof(chatish, fc.jsonValue({ maxDepth: 3 })), (raw) => {
        const copy = structuredClone(raw);
        const fast = fastChatBody(copy);
        if (fast === null) return;
        const parsed = chatRequestSchema.safeParse(raw);
        expect(parsed.success).toBe(true);
        expect(fast).toEqual(parsed.data);
      }),
      { numRuns: 500 },
    );
  });
});
