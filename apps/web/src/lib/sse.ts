/** A stream that failed: an error event in it (`data: {"error": {...}}`, `event: error`), or a cut before `[DONE]`. */
export class StreamError extends Error {
  override readonly name = 'StreamError';
}

/** The message of an OpenAI-shaped error event (`{"error": {"message": ...}}`, or a bare message), or null. */
export function streamErrorMessage(event: unknown): string | null {
  if (typeof event !== 'object' || event === null || !('error' in event)) return null;
  const error = (event as { error: unknown }).error;
  if (typeof error === 'string') return error || 'The stream reported an error.';
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message ? message : 'The stream reported an error.';
}

const DONE = Symbol('done');
const SKIP = Symbol('skip');

/** One SSE event's block of lines: its JSON, DONE for `[DONE]`, SKIP for nothing usable; throws on an error event. */
function parseEvent(block: string): unknown {
  const lines = block.split(/\r?\n/);
  const data = lines
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trimStart())
    .join('\n');
  const isErrorEvent = lines.some((l) => /^event:\s*error\s*$/.test(l));
  if (data === '[DONE]') return DONE;
  if (data === '' && !isErrorEvent) return SKIP;
  let parsed: unknown;
  try {
    parsed = JSON.parse(data) as unknown;
  } catch {
    // A malformed event is skipped, not fatal; a malformed error event is still an error.
    if (isErrorEvent) throw new StreamError(data || 'The stream reported an error.');
    return SKIP;
  }
  const message = streamErrorMessage(parsed) ?? (isErrorEvent ? (typeof parsed === 'string' ? parsed : data) : null);
  if (message !== null) throw new StreamError(message);
  return parsed;
}

/**
 * Reads an OpenAI-style SSE stream (`data: {...}` lines, `data: [DONE]`), yielding each JSON event. An error event
 * throws a `StreamError` with its message, and so does a stream that ends before `[DONE]` (the answer is cut): the
 * caller never takes a failed stream for a finished one.
 */
export async function* readSse(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<unknown> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      if (signal?.aborted) return;
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i: number;
      while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
        const event = parseEvent(buf.slice(0, i));
        buf = buf.slice(i).replace(/^\r?\n\r?\n/, '');
        if (event === DONE) return;
        if (event !== SKIP) yield event;
      }
    }
    // The last event may lack its blank line.
    const last = buf.trim() ? parseEvent(buf.trim()) : SKIP;
    if (last === DONE || signal?.aborted) return;
    if (last !== SKIP) yield last;
    throw new StreamError('The stream ended before it was complete: the reply may be cut short.');
  } finally {
    reader.releaseLock();
  }
}

/** The text delta of a chat.completion.chunk, if any. */
export function chunkText(event: unknown): string {
  const choices = (event as { choices?: { delta?: { content?: unknown } }[] } | null)?.choices;
  const content = choices?.[0]?.delta?.content;
  return typeof content === 'string' ? content : '';
}
