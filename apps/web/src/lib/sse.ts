/** Reads an OpenAI-style SSE stream (`data: {...}` lines, `data: [DONE]`), yielding each JSON event. */
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
        const event = buf.slice(0, i);
        buf = buf.slice(i).replace(/^\r?\n\r?\n/, '');
        const data = event
          .split(/\r?\n/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart())
          .join('\n');
        if (data === '') continue;
        if (data === '[DONE]') return;
        try {
          yield JSON.parse(data) as unknown;
        } catch {
          // a malformed event is skipped, not fatal
        }
      }
    }
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
