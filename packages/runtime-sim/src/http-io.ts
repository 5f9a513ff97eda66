import type { IncomingMessage, ServerResponse } from 'node:http';
import { ERRORS, type ErrorCode } from '@infer/shared';

const JSON_TYPE = 'application/json';

/** Writes a complete JSON response (the body is already serialized). */
export function sendJson(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Writes an OpenAI-shaped error: {"error":{"message","type","param","code"}}. */
export function sendError(res: ServerResponse, code: ErrorCode, message: string, param: string | null = null): void {
  const { status, type } = ERRORS[code];
  sendJson(res, status, JSON.stringify({ error: { message, type, param, code } }));
}

const CODE_BY_STATUS = new Map<number, ErrorCode>();
for (const [code, { status }] of Object.entries(ERRORS) as [ErrorCode, { status: number }][]) {
  if (!CODE_BY_STATUS.has(status)) CODE_BY_STATUS.set(status, code);
}

/** An OpenAI-shaped error for an arbitrary (injected) status. */
export function sendStatusError(res: ServerResponse, status: number, message: string): void {
  const code = CODE_BY_STATUS.get(status) ?? null;
  const type = code ? ERRORS[code].type : status >= 500 ? 'api_error' : 'invalid_request_error';
  sendJson(res, status, JSON.stringify({ error: { message, type, param: null, code } }));
}

/** Reads the whole body; resolves null (after answering 413) when it is larger than `limit`. */
export function readBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > limit) {
        // Answer now and drop the rest; `connection: close` ends the socket after the reply.
        tooLarge = true;
        res.setHeader('connection', 'close');
        sendError(res, 'request_too_large', `request body exceeds ${limit} bytes`);
        resolve(null);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}
