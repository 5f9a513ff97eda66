import { CLIENT_CLOSED, ClientGoneError } from '../client-gone.ts';
import type { ClientResponse } from '../front/client-response.ts';
import { ApiError, chatRequestSchema } from '@infer/shared';
import type { FastifyBaseLogger } from 'fastify';
import type { ConfigStore } from '../config/config-store.ts';
import { deploymentKey } from '../config/config-view.ts';
import type { ConfigView, ResolvedKey, RouteTarget } from '../config/config-view.ts';
import { sendError } from '../error-handler.ts';
import type { Admission, Limits } from '../limits/limits.ts';
import { logRequest } from '../logging.ts';
import { fastChatBody } from '../proxy/fast-chat-body.ts';
import { ChatBody } from '../proxy/chat-body.ts';
import { forwardChat } from '../proxy/forward-chat.ts';
import { meterId } from '../request-id.ts';
import type { HeldTicket, ScaleHolds } from '../scale/scale-holds.ts';
import type { ForwardDeps } from '../proxy/forward-chat.ts';
import { validationError } from '../validation-error.ts';

export interface DedicatedParams {
  readonly tenant: string;
  readonly name: string;
}

/** The client side of one chat request, whichever way it came in (raw fast path or Fastify route). */
export interface ChatExchange {
  /** The id echoed in `x-request-id`, logged and sent to the runtime. */
  readonly requestId: string;
  /** True when `requestId` is the caller's own `x-request-id` (not unique: see `meterId`). */
  readonly callerId: boolean;
  /** Headers already set on it (request id, CORS) go out with the answer. */
  readonly res: ClientResponse;
  /** Arrival, as epoch ms and as `performance.now()`. */
  readonly startedAt: number;
  readonly startPerf: number;
  readonly mode: 'shared' | 'dedicated';
  readonly log: FastifyBaseLogger;
}

export interface ChatHandlerDeps extends ForwardDeps {
  readonly store: ConfigStore;
  readonly limits: Limits;
  /** Holds dedicated requests through cold starts (absent: no ready replica is a 503 at once). */
  readonly scale?: ScaleHolds;
}

export interface ChatHandler {
  /**
   * Serves an authenticated chat request whose body was read (`dedicated`: the URL's tenant and name; `bytes`: the
   * body as received, when the caller has it: the runtime's request is then spliced from them, see raw-payload.ts).
   * Writes the answer, or the error, itself and counts the request once; never rejects.
   */
  serve(x: ChatExchange, key: ResolvedKey, dedicated: DedicatedParams | null, rawBody: unknown, bytes?: Buffer): Promise<void>;
  /** Answers a chat request that failed before `serve` (auth, body), and counts it. */
  fail(x: ChatExchange, err: unknown): void;
}

const NO_REPLICA = 'No replica of this model is ready. Try again shortly.';

/** Why a target has no replica: a stopped or failed deployment says so (retrying will not help), else 'try again'. */
const notReady = (target: RouteTarget): ApiError =>
  target.halted === 'stopped'
    ? new ApiError('deployment_stopped', `The deployment of ${target.name} is stopped: start it again to serve requests.`)
    : target.halted === 'failed'
      ? new ApiError('deployment_failed', `The deployment of ${target.name} failed to start: see its state in the console, then start it again.`)
      : new ApiError('no_healthy_upstream', NO_REPLICA);

/** Resolves a dedicated URL for a key: 403 for another tenant's URL, 404 for no deployment. */
export function findDeployment(view: ConfigView, key: ResolvedKey, params: DedicatedParams): RouteTarget {
  if (key.tenantSlug !== params.tenant) {
    throw new ApiError('permission_denied', `This API key does not belong to tenant '${params.tenant}'.`);
  }
  const target = view.deploymentByTenantAndName.get(deploymentKey(params.tenant, params.name));
  if (target === undefined) {
    // The URL names it, not the body's model (which may be absent): no param, as OpenAI's model_not_found has none.
    throw new ApiError('model_not_found', `The dedicated endpoint '${params.name}' does not exist for tenant '${params.tenant}'.`);
  }
  return target;
}

/** A caller's value quoted back in an error message: at most 200 characters of it (a 1 MiB model is not echoed whole). */
export const shown = (value: string, max = 200): string => (value.length <= max ? value : `${value.slice(0, max)}… (${value.length} characters)`);

/**
 * Dedicated `model`: absent, the Name, or `<provider>/<Name>` as the console shows it (`dedicatedModelName`).
 * The Name is matched exactly, as on the shared route; the provider without regard to case (`meta/` = `Meta/`).
 */
export function dedicatedModel(model: string | undefined, target: RouteTarget): string {
  const { name, prefixedModel } = target;
  if (model === undefined || model === name || model === prefixedModel) return model ?? name;
  if (prefixedModel !== null && model.length === prefixedModel.length && model.endsWith(name)) {
    const cut = prefixedModel.length - name.length;
    if (model.slice(0, cut).toLowerCase() === prefixedModel.slice(0, cut).toLowerCase()) return model;
  }
  const forms = prefixedModel === null ? `'${name}'` : `'${name}' or '${prefixedModel}'`;
  throw new ApiError('model_not_found', `The model '${shown(model)}' is not served by this endpoint; send ${forms} as 'model' (or leave it out).`, 'model');
}

/** The shared surface's 404 for a model it does not offer, with the published Name the caller most likely meant. */
export function unknownSharedModel(view: ConfigView, model: string): ApiError {
  const meant = view.suggestSharedModel(model);
  const hint = meant === null ? ' GET /endpoints/v1/models lists the published models.' : ` Did you mean '${meant}'?`;
  return new ApiError('model_not_found', `The model '${shown(model)}' does not exist or is not offered on the shared endpoint.${hint}`, 'model');
}

/** Optional fields that OpenAI's API (and clients that serialise unset options) send as `null`, meaning "not set". */
const NULLABLE_OPTIONALS = [
  'model',
  'stream',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'n',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'tools',
  'tool_choice',
  'response_format',
  'logprobs',
  'top_logprobs',
  'user',
  'logit_bias',
] as const;

/** The function a `tool_choice` object names (`{type: 'function', function: {name}}`), else null. */
function namedFunction(tc: unknown): string | null {
  if (typeof tc !== 'object' || tc === null) return null;
  const f = (tc as { type?: unknown; function?: unknown }).type === 'function' ? (tc as { function?: unknown }).function : null;
  const name = typeof f === 'object' && f !== null ? (f as { name?: unknown }).name : undefined;
  return typeof name === 'string' ? name : null;
}

/** The function names of `tools`. */
const toolNames = (tools: unknown): string[] =>
  Array.isArray(tools)
    ? tools.map((t) => (t as { function?: { name?: unknown } } | null)?.function?.name).filter((n): n is string => typeof n === 'string')
    : [];

/**
 * Rules between fields, as OpenAI answers them: `stream_options` (unless null) goes with `stream: true` only; a
 * `tool_choice` that demands a call (`required`, or a named tool) needs `tools`, and a named function must be one of
 * them; `top_logprobs` needs `logprobs: true`.
 */
function checkOptionPairs(body: Record<string, unknown>): void {
  const so = body['stream_options'];
  if (so !== undefined && so !== null && body['stream'] !== true) {
    throw new ApiError('invalid_request', "The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options');
  }
  const tc = body['tool_choice'];
  if (tc !== undefined && tc !== 'auto' && tc !== 'none' && body['tools'] === undefined) {
    throw new ApiError('invalid_request', "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", 'tool_choice');
  }
  const named = namedFunction(tc);
  if (named !== null && !toolNames(body['tools']).includes(named)) {
    throw new ApiError(
      'invalid_request',
      `Invalid value for 'tool_choice': it names the function '${named.slice(0, 64)}', which is not in 'tools'.`,
      'tool_choice',
    );
  }
  if (body['top_logprobs'] !== undefined && body['logprobs'] !== true) {
    throw new ApiError('invalid_request', "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.", 'top_logprobs');
  }
}

/** The validated body, with its bytes when it is their parse unchanged (the hand-written check took it, no coercion). */
function parseBody(raw: unknown, bytes: Buffer | undefined): ChatBody {
  // Common, well-typed bodies skip zod; everything else gets the schema (and its error messages).
  const fast = fastChatBody(raw);
  if (fast !== null) {
    checkOptionPairs(fast);
    return new ChatBody(fast, bytes);
  }
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    const b = raw as Record<string, unknown>;
    // `null` optionals mean unset: drop them (Reflect.deleteProperty: the names are a fixed list).
    for (const f of NULLABLE_OPTIONALS) if (b[f] === null) Reflect.deleteProperty(b, f);
  }
  const parsed = chatRequestSchema.safeParse(raw);
  if (!parsed.success) throw validationError(parsed.error);
  checkOptionPairs(parsed.data);
  return new ChatBody(parsed.data, undefined);
}

/** The chat routes' logic after auth and body reading: model resolution, limits, forwarding, errors. */
export function createChatHandler(deps: ChatHandlerDeps): ChatHandler {
  const { store, limits, metrics } = deps;

  /** `endpoint`: the resolved target's name (a name from the routing table, never the caller's input), when known. */
  const fail = (x: ChatExchange, err: unknown, endpoint = ''): void => {
    // No one to answer: a client that left while held or queued is counted as 499, not as our failure.
    const gone = err instanceof ClientGoneError;
    if (gone && !x.res.writableEnded) x.res.end();
    const status = gone ? CLIENT_CLOSED : sendError(x.res, err, x.log, x.requestId);
    metrics.countRequest('chat', x.mode, status, endpoint);
    if (deps.logInfo === true) logRequest(x.log, x.requestId, 'chat', x.mode, endpoint, status, performance.now() - x.startPerf);
  };

  const serve = async (x: ChatExchange, key: ResolvedKey, dedicated: DedicatedParams | null, rawBody: unknown, bytes?: Buffer): Promise<void> => {
    let forwarding = false;
    let held: HeldTicket | null = null;
    let endpoint = '';
    try {
      const view = store.view!; // auth passed, so a snapshot is loaded (and never unloaded)
      let target: RouteTarget;
      let clientModel: string;
      // Held only through `input` from here: the forwarder may drop the parsed form while the runtime works.
      let input: ChatBody;
      if (dedicated === null) {
        input = parseBody(rawBody, bytes);
        const model = input.value['model'] as string | undefined;
        if (model === undefined) throw new ApiError('invalid_request', "Missing required parameter: 'model'.", 'model');
        const shared = view.endpointByName.get(model);
        if (shared === undefined) throw unknownSharedModel(view, model);
        target = shared;
        clientModel = model;
      } else {
        target = findDeployment(view, key, dedicated);
        input = parseBody(rawBody, bytes);
        clientModel = dedicatedModel(input.value['model'] as string | undefined, target);
      }
      rawBody = null; // (a suspended async function keeps its parameters)
      endpoint = target.name;
      const usageId = meterId(x.requestId, x.callerId);
      // Serverless (src/scale): no ready replica yet, or earlier requests still held: wait in arrival order.
      held = deps.scale?.hold(x.res, target, usageId, input.value) ?? null;
      if (held !== null) target = await held.target;
      if (!target.ready) throw notReady(target);
      // Context length, RPM/TPM reservation, replica slot (src/limits); the slot frees when the answer ends. A
      // request released from a hold may wait for its slot until its hold deadline (a cold burst beyond every
      // replica's slots is served in turn, not cut at the queue's shorter timeout).
      const admitted = limits.admit(usageId, key, target, input.value, x.res, held?.remainingMs());
      const waited = admitted instanceof Promise;
      const admission: Admission = waited ? await admitted : admitted;
      // A request that waited for its slot is routed among the deployment's replicas of now (src/scale).
      if (held !== null) target = held.admitted() ?? target;
      else if (waited) target = deps.scale?.current(target) ?? target;
      forwarding = true;
      // The forwarder ends the admission once its runtime requests have really ended (not merely answered).
      await forwardChat(
        deps,
        {
          requestId: x.requestId,
          usageId,
          startedAt: x.startedAt,
          startPerf: x.startPerf,
          key,
          target,
          mode: x.mode,
          clientModel,
          input,
          admission,
        },
        x.res,
        x.log,
      );
    } catch (err) {
      held?.admitted();
      // The forwarder counted (and logged) its own failures with their real outcome.
      if (forwarding) sendError(x.res, err, x.log, x.requestId);
      else fail(x, err, endpoint);
    }
  };

  return { serve, fail };
}
