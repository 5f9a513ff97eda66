// Red-team finding (twentieth session): a prompt carried in `tools` and an answer made of tool-call arguments or
// reasoning were invisible to billing without the runtime's usage and to the limits' estimate. A stream cut during
// the tool call billed nothing at all; twenty concurrent requests with 42k tokens in `tools` each passed a
// 5,000-tokens-per-minute key. These tests make those requests against a runtime that streams tool calls.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '@infer/shared';
import { NAME, errorOf, post } from './helpers.ts';
import { CHAT, keyLimits, startLimitedNode, type LimitedNode } from './limits-fixtures.ts';

/** About 170 KB: some 30k tokens when it sits in a tool's description. */
const DOC = 'The quarterly report says revenue grew in every region. '.repeat(3000);
const CHUNKS = 400;

let runtime: Server;
let runtimeUrl: string;
/** Requests the runtime received, by the first message's content. */
const received: string[] = [];
let node: LimitedNode;
let limited: LimitedNode;

/**
 * A runtime that answers every request with a tool call: streamed as CHUNKS argument deltas 10 ms apart (or reasoning
 * deltas when the first message says REASON), then usage; as JSON without usage.
 */
function startToolRuntime(): Promise<Server> {
  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => {
      let body: { stream?: boolean; messages: { content: string }[] };
      try {
        body = JSON.parse(raw) as typeof body;
      } catch {
        res.writeHead(404).end();
        return;
      }
      received.push(body.messages[0]!.content);
      const base = { id: 'chatcmpl-t', object: 'chat.completion.chunk', created: 1, model: 'served' };
      if (body.stream !== true) {
        const call = { id: 'call_1', type: 'function', function: { name: 'answer', arguments: JSON.stringify({ text: 'word '.repeat(2000) }) } };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            ...base,
            object: 'chat.completion',
            choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [call] } }],
          }),
        );
        return;
      }
      const reasoning = body.messages[0]!.content === 'REASON';
      const send = (delta: Record<string, unknown>) =>
        res.write(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      send({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'answer', arguments: '' } }] });
      let i = 0;
      const timer = setInterval(() => {
        if (i++ < CHUNKS) {
          send(reasoning ? { reasoning_content: 'lorem ' } : { tool_calls: [{ index: 0, function: { arguments: 'lorem ' } }] });
          return;
        }
        clearInterval(timer);
        res.end(
          `data: ${JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: 1, completion_tokens: CHUNKS, total_tokens: CHUNKS + 1 } })}\n\ndata: [DONE]\n\n`,
        );
      }, 10);
      res.on('close', () => clearInterval(timer));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** The model's context holds the document (the context-length check is not what these tests are about). */
const longContext = (s: ConfigSnapshot): void => {
  for (const e of s.endpoints) e.contextLength = 131_072;
};

beforeAll(async () => {
  runtime = await startToolRuntime();
  runtimeUrl = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
  node = await startLimitedNode(runtimeUrl, longContext, {});
  limited = await startLimitedNode(
    runtimeUrl,
    (s) => {
      longContext(s);
      keyLimits(null, 5000)(s);
    },
    {},
  );
});
afterAll(async () => {
  await node?.app.close();
  await limited?.app.close();
  runtime?.closeAllConnections();
  await new Promise((r) => runtime?.close(r));
});

const toolBody = (first: string, stream: boolean): Record<string, unknown> => ({
  model: NAME,
  stream,
  messages: [
    { role: 'user', content: first },
    { role: 'user', content: 'Do what the tool description says.' },
  ],
  tools: [{ type: 'function', function: { name: 'answer', description: `Summarise this document: ${DOC}`, parameters: { type: 'object', properties: {} } } }],
  tool_choice: { type: 'function', function: { name: 'answer' } },
});

/** Reads the stream until `count` deltas of `lorem` came, then leaves; answers how many the client got. */
async function cutAfter(requestId: string, body: Record<string, unknown>, count: number): Promise<number> {
  const res = await post(node.url + CHAT, body, undefined, { 'x-request-id': requestId });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  let text = '';
  while ((text.match(/lorem /g) ?? []).length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString('utf8');
  }
  await reader.cancel(); // the client leaves
  return (text.match(/lorem /g) ?? []).length;
}

async function recordOf(node: LimitedNode, requestId: string) {
  const find = () => node.usage.records.find((r) => r.requestId.startsWith(`${requestId}.`));
  for (let i = 0; i < 500 && find() === undefined; i++) await new Promise((r) => setTimeout(r, 20));
  return find()!;
}

describe('billing what the runtime read and wrote besides message text', () => {
  it('a stream cut during a tool call bills the prompt in `tools` and every argument chunk the client got', async () => {
    const got = await cutAfter('cut-tool', toolBody('call', true), 100);
    const rec = await recordOf(node, 'cut-tool');
    expect(rec).toMatchObject({ status: 499, estimated: true });
    // The document alone is some 30k tokens; the messages' text a dozen.
    expect(rec.promptTokens).toBeGreaterThan(25_000);
    expect(rec.completionTokens).toBeGreaterThanOrEqual(got);
  });

  it('a stream cut during reasoning bills the reasoning chunks the client got', async () => {
    const got = await cutAfter('cut-reason', toolBody('REASON', true), 100);
    const rec = await recordOf(node, 'cut-reason');
    expect(rec).toMatchObject({ status: 499, estimated: true });
    expect(rec.promptTokens).toBeGreaterThan(25_000);
    expect(rec.completionTokens).toBeGreaterThanOrEqual(got);
  });

  it('a JSON tool call from a runtime that sends no usage bills its arguments', async () => {
    const res = await post(node.url + CHAT, toolBody('json', false), undefined, { 'x-request-id': 'json-tool' });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { choices: { message: { tool_calls: { function: { arguments: string } }[] } }[] };
    const args = answer.choices[0]!.message.tool_calls[0]!.function.arguments;
    const rec = await recordOf(node, 'json-tool');
    expect(rec).toMatchObject({ status: 200, estimated: true });
    expect(rec.completionTokens).toBeGreaterThanOrEqual(Math.floor(args.length / 4));
    expect(rec.promptTokens).toBeGreaterThan(25_000);
  });

  it('a key of 5,000 tokens a minute refuses a request with some 30k tokens in `tools`, before the runtime sees it', async () => {
    const before = received.length;
    const replies = await Promise.all(Array.from({ length: 5 }, () => post(limited.url + CHAT, { ...toolBody('limited', false), max_tokens: 1 })));
    for (const res of replies) {
      expect(res.status).toBe(429);
      expect((await errorOf(res)).code).toBe('rate_limit_exceeded');
    }
    expect(received.length).toBe(before);
  });
});
