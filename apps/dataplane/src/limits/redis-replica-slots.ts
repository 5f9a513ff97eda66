import type { Redis } from 'ioredis';
import { throttledWarn } from './redis-rate-limiter.ts';

// One sorted set per endpoint or deployment: member = a request's lease id, score = when the lease lapses
// (Redis's own clock, so every node agrees). Lapsed leases (a node that died mid-request) are swept on
// every take; live ones are renewed by their node while the request runs.
const TAKE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
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
  inferSlotTake(key: string, capacity: number, leaseId: string, ttlMs: number): Promise<number>;
  inferSlotRenew(key: string, ttlMs: number, ...leaseIds: string[]): Promise<number>;
}

/**
 * Replica slots shared by every data-plane node through Redis: an endpoint's capacity (replicas x base x
 * Concurrency) holds across the fleet, not per node. Fails open: while Redis is unreachable, `take`
 * answers true and each node's own gate is the only bound.
 */
export interface SharedReplicaSlots {
  /** Takes one of `capacity` fleet-wide slots of `gateId` for `leaseId`: false when all are taken. */
  take(gateId: string, capacity: number, leaseId: string): Promise<boolean>;
  /** Gives a slot back (a lease that was never taken is ignored). */
  give(gateId: string, leaseId: string): void;
  close(): void;
}

export interface SharedReplicaSlotsOptions {
  readonly redis: Redis;
  readonly prefix: string;
  /** How long a lease lives without renewal (a node that died frees its slots after this), ms; default 30 s. */
  readonly leaseMs?: number;
  readonly onWarn: (message: string, err: unknown) => void;
}

export function createSharedReplicaSlots(opts: SharedReplicaSlotsOptions): SharedReplicaSlots {
  const { redis } = opts;
  const leaseMs = opts.leaseMs ?? 30_000;
  redis.defineCommand('inferSlotTake', { numberOfKeys: 1, lua: TAKE_LUA });
  redis.defineCommand('inferSlotRenew', { numberOfKeys: 1, lua: RENEW_LUA });
  const cmd = redis as unknown as SlotCommands;
  /** Leases taken in Redis and not yet given back, by gate. */
  const leases = new Map<string, Set<string>>();
  const warn = throttledWarn(opts.onWarn);
  const keyOf = (gateId: string): string => `${opts.prefix}:slots:{${gateId}}`;

  // Long requests (streams run for minutes) keep their leases: renewed at a third of their life.
  const renew = setInterval(() => {
    if (redis.status !== 'ready') return;
    for (const [gateId, ids] of leases) {
      if (ids.size === 0) continue;
      cmd.inferSlotRenew(keyOf(gateId), leaseMs, ...ids).catch((err: unknown) => warn('redis replica-slot renewal failed', err));
    }
  }, Math.max(100, Math.floor(leaseMs / 3)));
  renew.unref();

  return {
    take(gateId, capacity, leaseId) {
      if (redis.status !== 'ready') return Promise.resolve(true);
      return cmd.inferSlotTake(keyOf(gateId), capacity, leaseId, leaseMs).then(
        (ok) => {
          if (ok !== 1) return false;
          let ids = leases.get(gateId);
          if (ids === undefined) leases.set(gateId, (ids = new Set()));
          ids.add(leaseId);
          return true;
        },
        (err: unknown) => {
          warn('redis replica-slot check failed; bounding replica concurrency per node', err);
          return true;
        },
      );
    },
    give(gateId, leaseId) {
      const ids = leases.get(gateId);
      if (ids === undefined || !ids.delete(leaseId)) return;
      if (ids.size === 0) leases.delete(gateId);
      if (redis.status !== 'ready') return; // the lease lapses by itself
      redis.zrem(keyOf(gateId), leaseId).catch((err: unknown) => warn('redis replica-slot release failed', err));
    },
    close() {
      clearInterval(renew);
    },
  };
}
