/**
 * A request's coerced body, and its bytes as the client sent them when the body is exactly their parse (no coercion):
 * the runtime's request is then spliced from the bytes (raw-payload.ts) instead of serialised again, and the parsed
 * form is dropped once the runtime has the request (`release`). Requests wait seconds on GPUs, thousands at once, and
 * each would otherwise keep its parsed prompt (tens of KiB for a long conversation) on the heap meanwhile, copied by
 * young collections and then promoted. `value` parses the bytes again when it is needed later (a retry, a prompt
 * count for a bill without the runtime's usage).
 */
export class ChatBody {
  private parsed: Record<string, unknown> | null;
  readonly bytes: Buffer | undefined;

  constructor(parsed: Record<string, unknown>, bytes: Buffer | undefined) {
    this.parsed = parsed;
    this.bytes = bytes;
  }

  get value(): Record<string, unknown> {
    return (this.parsed ??= JSON.parse(this.bytes!.toString('utf8')) as Record<string, unknown>);
  }

  /** Drops the parsed form when the bytes can stand for it. */
  release(): void {
    if (this.bytes !== undefined) this.parsed = null;
  }
}
