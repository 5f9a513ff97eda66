import type { RuntimeKind } from '@infer/shared';

/** What the data plane needs to know about one kind of GPU runtime. */
export interface RuntimeAdapter {
  readonly kind: RuntimeKind;
  /** Chat completions path, appended to the upstream's base path. */
  readonly chatPath: string;
  readonly modelsPath: string;
  /** Liveness/readiness probe path. */
  readonly healthPath: string;
  /** True when the runtime honours `stream_options.include_usage` with a final usage chunk. */
  readonly streamUsage: boolean;
  /** True when a runtime 4xx answer means the prompt does not fit the model's context. */
  isContextLengthError(status: number, message: string, code: string | null): boolean;
}
