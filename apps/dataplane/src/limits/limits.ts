import type { ClientResponse } from '../front/client-response.ts';
import { ApiError } from '@infer/shared';
import type { ConfigView, KeyRateLimits, ResolvedKey, RouteTarget } from '../config/config-view.ts';
import { afterDurable, type UsageSink } from '../usage/usage-reporter.ts';
import { ClientGoneError } from '../client-gone.ts';
import { QueueRejection, createConcurrencyGate, queueError } from './concurrency-gate.ts';
import { createMemoryRateLimiter } from './rate-limiter.ts';
import type { Charge, RateDecision, RateLimiter, WindowLimits } from './rate-limiter.ts';
import { rateLimitHeaders, retryAfterSeconds } from './ratelimit-headers.ts';
import { createRedisRateLimiter } from './redis-rate-limiter.ts';
import type { RedisBreaker } from './redis-breaker.ts';
import { createSharedReplicaSlots } from './redis-replica-slots.ts';
import type { SharedReplicaSlots } from './redis-replica-slots.ts';
import { checkContextLength, estimatePromptTokens, requestedCompletion, reservationTokens } from './token-budget.ts';

export interface LimitsOptions {
  /** RPM/TPM of keys whose key and tenant set none (null/absent: unlimited). */
  readonly defaultRpm?: number | null;
  readonly defaultTpm?: number | null;
  /** Completion tokens reserved when a request has no `max_tokens` (default 4096, bounded by the context). */
  readonly defaultCompletionTokens?: number;
  /** Requests one replica takes at once before the Concurrency multiplier (default 32). */
  readonly replicaBaseConcurrency?: number;
  /** Requests that may wait per endpoint or deployment (default 64; 0: none wait). */
  readonly queueMax?: number;
  /** Longest wait in that queue, ms (default 10 s). */
  readonly queueTimeoutMs?: number;
  /** Shares RPM/TPM among nodes when set. */
  readonly redisUrl?: string | null;
  /** Prefix of the Redis keys (default `infer:rl`). */
  readonly redisPrefix?: string;
  /** With Redis: life of a replica-slot lease that its node stops renewing (a node died), ms (default 30 s). */
  readonly sharedSlotLeaseMs?: number;
}

/**
 * Requests a node admits to a target at once: REPLICA_BASE_CONCURRENCY x the entry's Concurrency multiplier per
 * replica. Upstream pools are sized from it (upstream-pools.ts), so an admitted request never waits for a socket.
 */
export const DEFAULT_REPLICA_BASE_CONCURRENCY = 32;

export const targetCapacity = (base: number, multiplier: number | null, replicas: number, perReplica: number | null = null): number =>
  (perReplica ?? Math.max(1, Math.floor(base * (multiplier ?? 1)))) * Math.max(1, replicas);

/**
 * Requests one replica of a target takes at once: a deployment's own targetConcurrency (the snapshot's), else
 * REPLICA_BASE_CONCURRENCY x the entry's Concurrency multiplier. The router never sends a replica more.
 */
export const replicaConcurrency = (base: number, target: RouteTarget): number =>
  target.replicaConcurrency ?? Math.max(1, Math.floor(base * (target.limits.concurrency ?? 1)));

const NO_CHARGES: readonly Charge[] = Object.freeze([]);

/** With Redis, how often a request waiting for a fleet-wide replica slot asks again, ms. */
const SHARED_SLOT_POLL_MS = 20;

/** A request past admission; `end()` once the request is over (frees its slot). */
export interface Admission {
  end(): void;
}

export interface Limits {
  /**
   * Context-length pre-check, RPM/TPM check-and-reserve and a replica slot, in that order; throws the
   * caller's ApiError (400, 429, 503). Sets `x-ratelimit-*` on the response when a rate limit applies.
   * `waitMs`: how long this request may wait for a slot when that is longer than the queue's own timeout (a
   * request released from a cold-start hold keeps what is left of its hold deadline).
   */
  admit(
    requestId: string,
    key: ResolvedKey,
    target: RouteTarget,
    body: Record<string, unknown>,
    res: ClientResponse,
    waitMs?: number,
  ): Admission | Promise<Admission>;
  /** A usage sink that settles each request's token reservation from its usage record, then passes it on. */
  wrapUsage(sink: UsageSink): UsageSink;
  /** In flight and queued on a target (tests, metrics). */
  concurrency(target: RouteTarget): { active: number; queued: number };
  /** Requests one replica of the target takes at once (see `replicaConcurrency`). */
  replicaCap(target: RouteTarget): number;
  /** A new snapshot: gates take their targets' new capacity (waiters get the slots of added replicas at once). */
  follow(view: ConfigView): void;
  /** With Redis: its circuit breaker and the fleet-wide replica slots (metrics, tests); null without. */
  readonly redis: { readonly breaker: RedisBreaker; readonly slots: SharedReplicaSlots; failingOpen(): boolean } | null;
  /** Waits (bounded) for the Redis connection, when there is one. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

interface ReservedAdmission extends Admission {
  settled: boolean;
  /** Corrects the reservation to the tokens really used. */
  settle(actualTokens: number): void;
}

/** The window id of a tenant's limits (key ids are UUIDs, so the two never meet). */
const tenantWindow = (tenantId: string): string => `tenant:${tenantId}`;

const remaining = (limit: number | null, used: number): number => (limit === null ? Number.POSITIVE_INFINITY : limit - used);

/**
 * What a caller is told of two windows: for requests and for tokens apart, the window with less room left (a refusal
 * is told by the window that refused).
 */
function tighter(a: RateDecision, b: RateDecision): RateDecision {
  const r = remaining(b.rpmLimit, b.requestsUsed) < remaining(a.rpmLimit, a.requestsUsed) ? b : a;
  const t = remaining(b.tpmLimit, b.tokensUsed) < remaining(a.tpmLimit, a.tokensUsed) ? b : a;
  if (r === t) return r;
  return {
    ...r,
    tpmLimit: t.tpmLimit,
    tokensUsed: t.tokensUsed,
    resetTokensMs: t.resetTokensMs,
    retryAfterMs: Math.max(r.retryAfterMs, t.retryAfterMs),
  };
}

/**
 * Per-key and per-tenant RPM/TPM (in memory, or shared through Redis), per-target replica concurrency, context-length
 * pre-check. The limits themselves come from the config view (`ResolvedKey.limits`, `.tenantLimits`,
 * `RouteTarget.limits`); the node's defaults apply to the tenant's window where the tenant sets none.
 */
export function createLimits(opts: LimitsOptions, warn: (message: string, err: unknown) => void): Limits {
  const defaultRpm = opts.defaultRpm ?? null;
  const defaultTpm = opts.defaultTpm ?? null;
  /**
   * The tenant's window (every key of the tenant together): its own limits, else the node's defaults. A key's own limit
   * (which members set) only narrows it: neither more keys nor a higher key limit get past the operator's default.
   */
  const tenantLimitsOf = (k: ResolvedKey): KeyRateLimits => {
    const own = k.tenantLimits;
    const rpm = own.rpm ?? defaultRpm;
    const tpm = own.tpm ?? defaultTpm;
    return rpm === own.rpm && tpm === own.tpm ? own : { rpm, tpm };
  };
  const defaultCompletion = opts.defaultCompletionTokens ?? 4096;
  const base = opts.replicaBaseConcurrency ?? DEFAULT_REPLICA_BASE_CONCURRENCY;
  const queueMax = opts.queueMax ?? 64;
  const queueTimeoutMs = opts.queueTimeoutMs ?? 10_000;
  const gate = createConcurrencyGate({ queueMax, queueTimeoutMs });
  const memory = createMemoryRateLimiter();
  const redis = opts.redisUrl ? createRedisRateLimiter({ url: opts.redisUrl, prefix: opts.redisPrefix ?? 'infer:rl', fallback: memory, onWarn: warn }) : null;
  const limiter: RateLimiter = redis ?? memory;
  // Replica concurrency: this node's gate (FIFO queue, deadline), then, with Redis, a fleet-wide slot.
  const slots = redis
    ? createSharedReplicaSlots({
        redis: redis.client,
        breaker: redis.breaker,
        prefix: opts.redisPrefix ?? 'infer:rl',
        leaseMs: opts.sharedSlotLeaseMs,
        onWarn: warn,
      })
    : null;
  /** Reservations waiting for their usage record, by request id. */
  const pending = new Map<string, ReservedAdmission>();

  /** Gives a request that was never served back to every window it was charged to. */
  const refundAll = (charges: readonly Charge[], reserved: number): void => limiter.settle(charges, true, -reserved);

  const createAdmission = (requestId: string, charges: readonly Charge[], reserved: number, gateId: string): ReservedAdmission => {
    const a: ReservedAdmission = {
      settled: false,
      settle(actualTokens) {
        if (a.settled || charges.length === 0) return;
        a.settled = true;
        limiter.settle(charges, false, Math.ceil(actualTokens) - reserved);
      },
      end() {
        gate.release(gateId);
        slots?.give(gateId, requestId);
        // No usage record came: the reservation stands as charged.
        if (charges.length > 0 && pending.get(requestId) === a) pending.delete(requestId);
      },
    };
    return a;
  };

  /** `allowance`: completion tokens booked for a request without max_tokens (0 when it set one). */
  const rateLimited = (d: RateDecision, tenant: boolean, reserved: number, allowance: number): ApiError => {
    const requestsFull = d.rpmLimit !== null && d.requestsUsed >= d.rpmLimit;
    const which = requestsFull ? `requests per minute (limit ${d.rpmLimit})` : `tokens per minute (limit ${d.tpmLimit})`;
    const whose = tenant ? "this API key's tenant (all its keys together)" : 'this API key';
    // A request without max_tokens books a whole default completion until its usage settles: say so, and how to ask for less.
    const why =
      !requestsFull && allowance > 0
        ? ` This request counts as about ${reserved} tokens until it is answered: its messages plus ${allowance} for the completion, since max_tokens is not set; set max_tokens to count less.`
        : '';
    return new ApiError(
      'rate_limit_exceeded',
      `Rate limit reached for ${whose} on ${which}. Please try again in ${retryAfterSeconds(d.retryAfterMs)}s.${why}`,
      null,
      { ...rateLimitHeaders(d), 'retry-after': retryAfterSeconds(d.retryAfterMs) },
    );
  };

  const afterRate = (
    requestId: string,
    charges: readonly Charge[],
    told: RateDecision | null,
    reserved: number,
    target: RouteTarget,
    multiplier: number | null,
    res: ClientResponse,
    waitMs: number,
  ): Admission | Promise<Admission> => {
    if (told !== null) {
      const headers = rateLimitHeaders(told);
      // A stream held through a cold start (src/scale) already sent its headers.
      if (!res.headersSent) for (const name in headers) res.setHeader(name, headers[name]!);
    }
    const gateId = target.deploymentId ?? target.endpointId;
    const capacity = targetCapacity(base, multiplier, target.upstreams.length, target.replicaConcurrency ?? null);
    const admission = createAdmission(requestId, charges, reserved, gateId);
    if (charges.length > 0 && !pending.has(requestId)) pending.set(requestId, admission);
    const refused = (err: unknown): never => {
      // Never served: give the request and its tokens back.
      if (charges.length > 0) {
        admission.settled = true;
        if (pending.get(requestId) === admission) pending.delete(requestId);
        refundAll(charges, reserved);
      }
      const outcome = err instanceof QueueRejection ? err.outcome : 'aborted';
      throw queueError(outcome, capacity, queueMax, waitMs) ?? new ClientGoneError('was queued for a replica slot');
    };
    const wait = gate.acquire(gateId, capacity, res, waitMs);
    if (slots === null) return wait === null ? admission : wait.then(() => admission, refused);
    const deadline = Date.now() + waitMs;
    const shared = (): Promise<Admission> =>
      takeSharedSlot(gateId, capacity, requestId, res, deadline).then(
        () => admission,
        (err: unknown) => {
          gate.release(gateId);
          return refused(err);
        },
      );
    return wait === null ? shared() : wait.then(shared, refused);
  };

  /** Waits (polling, within the queue's deadline) for a fleet-wide slot; rejects with a QueueRejection. */
  const takeSharedSlot = async (gateId: string, capacity: number, leaseId: string, res: ClientResponse, deadline: number): Promise<void> => {
    let gone = false;
    const onClose = (): void => {
      gone = true;
    };
    res.once('close', onClose);
    try {
      for (;;) {
        if (await slots!.take(gateId, capacity, leaseId)) {
          if (!gone) return;
          slots!.give(gateId, leaseId);
        }
        if (gone) throw new QueueRejection('aborted');
        if (queueMax === 0) throw new QueueRejection('full');
        if (Date.now() + SHARED_SLOT_POLL_MS > deadline) throw new QueueRejection('timeout');
        await new Promise((r) => setTimeout(r, SHARED_SLOT_POLL_MS));
      }
    } finally {
      res.off('close', onClose);
    }
  };

  return {
    admit(requestId, key, target, body, res, waitMs) {
      const { contextLength, concurrency: multiplier } = target.limits;
      const wait = waitMs === undefined || !(waitMs > queueTimeoutMs) ? queueTimeoutMs : waitMs;
      const prompt = estimatePromptTokens(body);
      const maxTokens = requestedCompletion(body);
      checkContextLength(contextLength, prompt, maxTokens);
      const kl = key.limits;
      const tl = tenantLimitsOf(key);
      const byKey = kl.rpm !== null || kl.tpm !== null;
      const byTenant = tl.rpm !== null || tl.tpm !== null;
      if (!byKey && !byTenant) return afterRate(requestId, NO_CHARGES, null, 0, target, multiplier, res, wait);

      const tpm = kl.tpm === null ? tl.tpm : tl.tpm === null ? kl.tpm : Math.min(kl.tpm, tl.tpm);
      let tokens = reservationTokens(body, prompt, maxTokens, contextLength, defaultCompletion);
      if (tpm !== null && tokens > tpm) {
        if (maxTokens !== null) {
          const whose = tpm === kl.tpm ? "this API key's" : "this API key's tenant's";
          throw new ApiError(
            'rate_limit_exceeded',
            `Request too large for ${whose} tokens per minute: limit ${tpm}, requested about ${tokens} (messages plus max_tokens). Lower max_tokens or shorten the messages.`,
            null,
            { 'x-ratelimit-limit-tokens': String(tpm), 'retry-after': '60' },
          );
        }
        tokens = tpm; // no max_tokens: reserve the whole minute; real usage settles it
      }
      const allowance = maxTokens === null ? Math.max(0, tokens - prompt) : 0;
      // The tenant's window (all its keys together) and the key's own, charged together or not at all.
      const windows: WindowLimits[] = [];
      if (byTenant) windows.push({ id: tenantWindow(key.tenantId), rpm: tl.rpm, tpm: tl.tpm });
      if (byKey) windows.push({ id: key.id, rpm: kl.rpm, tpm: kl.tpm });
      const decided = (ds: readonly RateDecision[]): Admission | Promise<Admission> => {
        if (!ds[0]!.admitted) {
          // Told by the first window that refused (the tenant's before the key's), retrying once every one has room.
          const at = ds.findIndex((d) => d.retryAfterMs > 0);
          const retryAfterMs = Math.max(...ds.map((d) => d.retryAfterMs));
          throw rateLimited({ ...ds[at]!, retryAfterMs }, byTenant && at === 0, tokens, allowance);
        }
        const charges: Charge[] = windows.map((w, i) => ({ id: w.id, d: ds[i]! }));
        return afterRate(requestId, charges, ds.length === 1 ? ds[0]! : tighter(ds[0]!, ds[1]!), tokens, target, multiplier, res, wait);
      };
      const ds = limiter.reserve(windows, tokens);
      return ds instanceof Promise ? ds.then(decided) : decided(ds);
    },
    wrapUsage(sink) {
      return {
        record(r) {
          const a = pending.get(r.requestId);
          if (a !== undefined) {
            pending.delete(r.requestId);
            a.settle(r.promptTokens + r.completionTokens);
          }
          sink.record(r);
        },
        whenDurable: (fn) => afterDurable(sink, fn),
      };
    },
    redis: redis && slots ? { breaker: redis.breaker, slots, failingOpen: redis.failingOpen } : null,
    concurrency(target) {
      return gate.stats(target.deploymentId ?? target.endpointId);
    },
    replicaCap: (target) => replicaConcurrency(base, target),
    follow(view) {
      const resize = (t: RouteTarget): void => {
        if (t.upstreams.length > 0)
          gate.resize(t.deploymentId ?? t.endpointId, targetCapacity(base, t.limits.concurrency, t.upstreams.length, t.replicaConcurrency ?? null));
      };
      for (const t of view.endpointByName.values()) resize(t);
      for (const t of view.deploymentByTenantAndName.values()) resize(t);
    },
    ready: () => (redis ? redis.ready(2000) : Promise.resolve()),
    close: () => {
      slots?.close();
      return limiter.close();
    },
  };
}
