import { describe, expect, it } from 'vitest';
import { membersAsWritten, rawPayload } from './raw-payload.ts';

/** What the runtime must receive: the client's body with the served model and, for a stream, usage forced on. */
function expected(text: string, served: string, stream: boolean): unknown {
  const body = JSON.parse(text) as Record<string, unknown>;
  body['model'] = served;
  if (stream) body['stream_options'] = { ...(body['stream_options'] as object | undefined), include_usage: true };
  return body;
}

function check(text: string, served: string, stream: boolean): Buffer {
  const raw = Buffer.from(text);
  const out = rawPayload(raw, (JSON.parse(text) as Record<string, unknown>)['model'], served, stream);
  expect(out).not.toBeNull();
  expect(JSON.parse(out!.toString('utf8'))).toEqual(expected(text, served, stream));
  return out!;
}

const MESSAGES = '"messages":[{"role":"user","content":"Say \\"model\\": no, and é 日本"}]';

describe('rawPayload', () => {
  it('replaces the top-level model value, keeping every other byte', () => {
    const text = `{"model":"public-name",${MESSAGES},"max_tokens":16}`;
    const out = check(text, 'org/served-7b', false);
    expect(out.toString('utf8')).toBe(`{"model":"org/served-7b",${MESSAGES},"max_tokens":16}`);
  });

  it('handles whitespace around the colon, escapes in the old value and names that need escaping', () => {
    check(`{ \n\t"model" :\r\n "a\\"b\\\\" , ${MESSAGES}}`, 'served "quoted" \\ name', false);
    check(`{${MESSAGES}, "model": "p\\/ublic"}`, 'served', true);
  });

  it('inserts model when the body has none (a dedicated endpoint) and stream_options for a stream', () => {
    const out = check(`  {${MESSAGES},"stream":true}`, 'served', true);
    expect(out.toString('utf8')).toBe(`  {"model":"served","stream_options":{"include_usage":true},${MESSAGES},"stream":true}`);
  });

  it('returns the bytes themselves when nothing changes', () => {
    const raw = Buffer.from(`{"model":"same",${MESSAGES}}`);
    expect(rawPayload(raw, 'same', 'same', false)).toBe(raw);
    check(`{"model":"same",${MESSAGES},"stream":true}`, 'same', true);
  });

  it('a nested model key does not matter when the body has no model of its own', () => {
    check(`{${MESSAGES},"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"model":{"type":"string"}}}}}]}`, 'served', false);
  });

  it('gives up (the caller serialises the parsed body) whenever the edit is not certain', () => {
    const tools = `"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"model":{"type":"string"}}}}}]`;
    // "model" twice: which one is top-level is not known without parsing.
    expect(rawPayload(Buffer.from(`{"model":"m",${MESSAGES},${tools}}`), 'm', 'served', false)).toBeNull();
    expect(rawPayload(Buffer.from(`{"model":"a","model":"m",${MESSAGES}}`), 'm', 'served', false)).toBeNull();
    // The client's own stream_options on a stream: merged by the parsed path.
    expect(rawPayload(Buffer.from(`{"model":"m",${MESSAGES},"stream":true,"stream_options":{"include_usage":false}}`), 'm', 'served', true)).toBeNull();
    // Not UTF-8: the parsed body holds U+FFFD where these bytes are, and that is what the runtime must get.
    const bad = Buffer.concat([Buffer.from(`{"model":"m","messages":[{"role":"user","content":"`), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]);
    expect(rawPayload(bad, 'm', 'served', false)).toBeNull();
    // A byte-order mark or anything but an object first.
    expect(rawPayload(Buffer.from(`\ufeff{"model":"m",${MESSAGES}}`), 'm', 'served', false)).toBeNull();
    // A model that is not a string never reaches here from the check, and is refused if it did.
    expect(rawPayload(Buffer.from(`{"model":5,${MESSAGES}}`), 5, 'served', false)).toBeNull();
    // A cut body.
    expect(rawPayload(Buffer.from('{"model":"m'), 'm', 'served', false)).toBeNull();
  });
});

describe('membersAsWritten', () => {
  const check = (text: string): boolean => membersAsWritten(Buffer.from(text), JSON.parse(text) as Record<string, unknown>);
  it('refuses a top-level integer written with a fraction or an exponent, wherever its key occurs, nothing else', () => {
    expect(check('{"max_tokens":16,"temperature":0.7,"top_p":1,"seed":-3,"x":1.5e-3}')).toBe(true);
    expect(check('{"max_tokens":16.0}')).toBe(false);
    expect(check('{"max_tokens" : 1e2}')).toBe(false);
    expect(check('{"temperature": 1.0, "n": 2}')).toBe(false);
    // The key as a value, or in a string, is not a member.
    expect(check('{"content":"max_tokens\\": 16.0","list":["n"],"n":2}')).toBe(true);
    // Numbers that are not integers, or not top-level, go as written.
    expect(check('{"temperature":0.50,"tools":[{"minimum":1.0}]}')).toBe(true);
  });

  it('refuses an integer member whose key occurs twice as a key (a duplicate, or the same name nested)', () => {
    expect(check('{"max_tokens":100000,"max_tokens":1}')).toBe(false);
    expect(check('{"tools":[{"n":3}],"n":3}')).toBe(false);
  });

  it('refuses numbers a double cannot hold, and bodies of many numeric members (each costs a search)', () => {
    expect(check('{"presence_penalty":1e400}')).toBe(false);
    const many = `{${Array.from({ length: 9 }, (_, i) => `"k${i}":1`).join(',')}}`;
    expect(check(many)).toBe(false);
    const huge = `{${Array.from({ length: 50_000 }, (_, i) => `"k${i}":1`).join(',')}}`;
    expect(check(huge)).toBe(false);
    expect(check(`{${Array.from({ length: 8 }, (_, i) => `"k${i}":1`).join(',')}}`)).toBe(true);
  });
});

describe('rawPayload and escaped names', () => {
  it('gives up on any \\u escape: an escaped top-level key is invisible to a byte search', () => {
    // "mod\u0065l" is the top-level model; the literal "model" is nested.
    const text = '{"mod\\u0065l":"pub","messages":[{"role":"user","content":"hi"}],"metadata":{"model":"b"}}';
    const parsed = JSON.parse(text) as Record<string, unknown>;
    expect(parsed['model']).toBe('pub');
    expect(rawPayload(Buffer.from(text), parsed['model'], 'served', false)).toBeNull();
    // A stream whose client's stream_options hides behind an escape would otherwise keep include_usage off.
    const so = '{"stream":true,"stream_opti\\u006fns":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}';
    expect(rawPayload(Buffer.from(so), undefined, 'served', true)).toBeNull();
  });
});
