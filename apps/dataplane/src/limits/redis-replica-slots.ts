import type { Redis } from 'ioredis';
import { BreakerOpenError } from './redis-breaker.ts';
import type { RedisBreaker } from './redis-breaker.ts';
import { throttledWarn } from './redis-rate-limiter.ts';

// One sorted set per endpoint or deployment: member = a request's lease id, score = when the lease lapses
// (Redis's own clock, so every node agrees). Lapsed leases (a node that died mid-request) are swept on
// every take; live ones are renewed by their node while the request runs. A second sorted set holds the
// ids of leases released without a known take (tombstones, kept two lease lives): a take that Redis runs
// late (queued behind a freeze, after its node gave up waiting and the request ended) finds its tombstone
// and takes nothing. Leases whose take was answered are released with a plain ZREM: no tombstone needed.
/** KEYS: the set, its tombstones. ARGV: capacity, lease id, ttl. */
const TAKE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 0 end
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 1 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return 1
`;

/** KEYS: the set, its tombstones. ARGV: ttl, then lease ids; removes each and leaves its tombstone. */
const RELEASE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZADD', KEYS[2], now + ttl * 2, ARGV[i])
end
redis.call('PEXPIRE', KEYS[2], ttl * 2)
return 1
`;

/** KEYS: the set. ARGV: ttl, then lease ids; renews only leases still there (XX). */
const RENEW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return 1
`;

interface SlotCommands {
  inferSlotTake(key: string, tombstones: string, capacity: number, leaseId: string, ttlMs: number): Promise<number>;
  inferSlotRelease(key: string, tombstones: string, ttlMs: number, ...leaseIds: string[]): Promise<number>;
  inferSlotRenew(key: string, ttlMs: number, ...leaseIds: string[]): Promise<number>;
}

/**
 * Replica slots shared by every data-plane node through Redis: an endpoint's capacity (replicas x base x
 * Concurrency) holds across the fleet, not per node. Fails open: while Redis is unreachable or known to be
 * slow (the breaker is open), `take` answers true at once and each node's own gate is the only bound.
 * Taking and releasing are idempotent by lease id, so a take whose answer never came is released like any
 * other: whichever of the two Redis runs first, no lease outlives its request.
 */
export interface SharedReplicaSlots {
  /** Takes one of `capacity` fleet-wide slots of `gateId` for `leaseId`: false when all are taken. */
  take(gateId: string, capacity: number, leaseId: string): Promise<boolean>;
  /** Gives a slot back (a lease that was never sent to Redis is ignored). */
  give(gateId: string, leaseId: string): void;
  /** Leases held or possibly held in Redis, and releases waiting for Redis to answer again (tests, metrics). */
  stats(): { held: number; pendingReleases: number };
  close(): void;
}

export interface SharedReplicaSlotsOptions {
  readonly redis: Redis;
  readonly breaker: RedisBreaker;
  readonly prefix: string;
  /** How long a lease lives without renewal (a node that died frees its slots after this), ms; default 30 s. */
  readonly leaseMs?: number;
  readonly onWarn: (message: string, err: unknown) => void;
}

export function createSharedReplicaSlots(opts: SharedReplicaSlotsOptions): SharedReplicaSlots {
  const { redis, breaker } = opts;
  const leaseMs = opts.leaseMs ?? 30_000;
  redis.defineCommand('inferSlotTake', { numberOfKeys: 2, lua: TAKE_LUA });
  redis.defineCommand('inferSlotRelease', { numberOfKeys: 2, lua: RELEASE_LUA });
  redis.defineCommand('inferSlotRenew', { numberOfKeys: 1, lua: RENEW_LUA });
  const cmd = redis as unknown as SlotCommands;
  /** Leases sent to Redis (taken, or a take whose answer never came) and not yet given back, by gate. */
  const leases = new Map<string, Set<string>>();
  /** Leases whose take was sent but never answered: Redis may run it after the release. */
  const uncertain = new Set<string>();
  /** Releases that could not be sent (breaker open, Redis gone), by gate: sent when Redis answers again. */
  const deferred = new Map<string, Set<string>>();
  const warn = throttledWarn(opts.onWarn);
  const keyOf = (gateId: string): string => `${opts.prefix}:slots:{${gateId}}`;
  const tombstonesOf = (gateId: string): string => `${opts.prefix}:slots:{${gateId}}:released`;
  const usable = (): boolean => redis.status === 'ready' && breaker.state === 'closed';

  const add = (m: Map<string, Set<string>>, gateId: string, leaseId: string): void => {
    let ids = m.get(gateId);
    if (ids === undefined) m.set(gateId, (ids = new Set()));
    ids.add(leaseId);
  };

  const release = (gateId: string, ids: string[], tombstone: boolean): void => {
    if (!usable()) {
      for (const id of ids) add(deferred, gateId, id);
      return;
    }
    const sent = tombstone
      ? breaker.run(() => cmd.inferSlotRelease(keyOf(gateId), tombstonesOf(gateId), leaseMs, ...ids))
      : breaker.run(() => redis.zrem(keyOf(gateId), ...ids));
    sent.catch((err: unknown) => {
      // Not known to have run: try again once Redis answers (releasing twice is harmless).
      for (const id of ids) add(deferred, gateId, id);
      if (!(err instanceof BreakerOpenError)) warn('redis replica-slot release failed; retrying when redis answers', err);
    });
  };

  const flushDeferred = (): void => {
    if (deferred.size === 0 || !usable()) return;
    const all = [...deferred];
    deferred.clear();
    for (const [gateId, ids] of all) release(gateId, [...ids], true);
  };
  // Redis answers again: queued takes have run by now (one connection, in order); release what ended meanwhile.
  breaker.onChange((state) => {
    if (state === 'closed') flushDeferred();
  });
  redis.on('ready', flushDeferred);

  // Long requests (streams run for minutes) keep their leases: renewed at a third of their life.
  const renew = setInterval(
    () => {
      flushDeferred();
      if (!usable()) return;
      for (const [gateId, ids] of leases) {
        if (ids.size === 0) continue;
        breaker
          .run(() => cmd.inferSlotRenew(keyOf(gateId), leaseMs, ...ids))
          .catch((err: unknown) => {
            if (!(err instanceof BreakerOpenError)) warn('redis replica-slot renewal failed', err);
          });
      }
    },
    Math.max(100, Math.floor(leaseMs / 3)),
  );
  renew.unref();

  return {
    take(gateId, capacity, leaseId) {
      if (!usable()) return Promise.resolve(true);
      return breaker
        .run(() => cmd.inferSlotTake(keyOf(gateId), tombstonesOf(gateId), capacity, leaseId, leaseMs))
        .then(
          (ok) => {
            if (ok !== 1) return false;
            add(leases, gateId, leaseId);
            return true;
          },
          (err: unknown) => {
            // Sent but unanswered (a timeout): Redis may still run it later, so the lease is remembered and
            // released with its request like a taken one. Refused by the open breaker: never sent, nothing to remember.
            if (!(err instanceof BreakerOpenError)) {
              add(leases, gateId, leaseId);
              uncertain.add(leaseId);
              warn('redis replica-slot check failed; bounding replica concurrency per node', err);
            }
            return true;
          },
        );
    },
    give(gateId, leaseId) {
      const ids = leases.get(gateId);
      if (ids === undefined || !ids.delete(leaseId)) return;
      if (ids.size === 0) leases.delete(gateId);
      release(gateId, [leaseId], uncertain.delete(leaseId));
    },
    stats() {
      let held = 0;
      for (const ids of leases.values()) held += ids.size;
      let pendingReleases = 0;
      for (const ids of deferred.values()) pendingReleases += ids.size;
      return { held, pendingReleases };
    },
    close() {
      clearInterval(renew);
    },
  };
}
