/** One server-sent event. */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
  readonly id: string | null;
}

export interface SseParser {
  /** Feeds text; returns the events it completed. */
  push(text: string): SseEvent[];
  /** The last `retry:` value, or null. */
  readonly retryMs: number | null;
}

/** A small spec-following SSE parser (comments, multi-line data, CRLF, `id`, `retry`). */
export function createSseParser(): SseParser {
  let buf = '';
  let event = '';
  let data: string[] = [];
  let id: string | null = null;
  let retryMs: number | null = null;

  const line = (l: string, out: SseEvent[]): void => {
    if (l === '') {
      if (data.length > 0) out.push({ event: event || 'message', data: data.join('\n'), id });
      event = '';
      data = [];
      return;
    }
    if (l.startsWith(':')) return;
    const colon = l.indexOf(':');
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? '' : l.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
    else if (field === 'retry' && /^\d+$/.test(value)) retryMs = Number(value);
  };

  return {
    push(text) {
      buf += text;
      const out: SseEvent[] = [];
      let start = 0;
      for (;;) {
        const nl = buf.indexOf('\n', start);
        if (nl < 0) break;
        const end = nl > start && buf.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
        line(buf.slice(start, end), out);
        start = nl + 1;
      }
      buf = buf.slice(start);
      return out;
    },
    get retryMs() {
      return retryMs;
    },
  };
}
