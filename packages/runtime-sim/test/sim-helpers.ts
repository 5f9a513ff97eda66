import { createRuntimeSim, type RuntimeSim, type RuntimeSimOptions } from '../src/index.ts';

export interface StartedSim {
  readonly sim: RuntimeSim;
  readonly url: string;
}

/** Starts a sim on an ephemeral port; the caller closes it. */
export async function startSim(options: RuntimeSimOptions = {}): Promise<StartedSim> {
  const sim = createRuntimeSim(options);
  const { url } = await sim.listen(0);
  return { sim, url };
}

export const userMessages = (text: string) => [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: text },
];

export function postChat(url: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(init.headers as Record<string, string> | undefined) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: init.signal ?? null,
  });
}

export interface SseResult {
  /** The `data:` payloads in order ("[DONE]" included as is). */
  readonly data: string[];
  /** Set when the connection broke before the body ended. */
  readonly error: unknown;
}

export interface SseStream {
  /** Reads up to `count` more events (default: to the end or until the connection breaks). */
  read(count?: number): Promise<SseResult>;
}

/** Opens an SSE body for incremental reading, splitting events on blank lines. */
export function openSse(res: Response): SseStream {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const pending: string[] = [];
  const drain = () => {
    let idx: number;
    while ((idx = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, idx);
      buffer = buffer.slice(idx + 2);
      for (const line of event.split('\n')) if (line.startsWith('data: ')) pending.push(line.slice(6));
    }
  };
  return {
    async read(count = Number.POSITIVE_INFINITY) {
      let error: unknown = null;
      try {
        while (pending.length < count) {
          const { done, value } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          drain();
        }
      } catch (err) {
        error = err;
      }
      return { data: pending.splice(0, Math.min(count, pending.length)), error };
    },
  };
}

/** Reads a whole SSE body (or up to `count` events). */
export const readSse = (res: Response, count?: number): Promise<SseResult> => openSse(res).read(count);

/** Polls until `check` returns true, failing after a generous deadline. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
