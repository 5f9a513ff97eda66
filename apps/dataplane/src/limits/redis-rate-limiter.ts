import { createRequire } from 'node:module';
import type { Redis as RedisClient } from 'ioredis';
import { BreakerOpenError, createRedisBreaker } from './redis-breaker.ts';
import type { RedisBreaker } from './redis-breaker.ts';
import { SLOT_MS, SLOTS } from './sliding-window.ts';
import type { RateDecision, RateLimiter } from './rate-limiter.ts';

// The same 60 x 1 s sliding window as sliding-window.ts, one hash per counter: field 't' the total,
// 'o' the oldest live slot, and one field per slot. Redis's own clock (TIME) orders every node.
const WINDOW_FNS = `
local W = ${SLOTS}
local SLOT = ${SLOT_MS}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = math.floor(now / SLOT)

local function load(key)
  local st = redis.call('HMGET', key, 't', 'o')
  local total = tonumber(st[1]) or 0
  local oldest = tonumber(st[2]) or cur
  if total <= 0 then
    if st[1] then redis.call('DEL', key) end
    return 0, cur
  end
  local floor = cur - W + 1
  if oldest < floor then
    if floor - oldest >= W then
      redis.call('DEL', key)
      return 0, cur
    end
    for i = oldest, floor - 1 do
      local v = tonumber(redis.call('HGET', key, i))
      if v then
        total = total - v
        redis.call('HDEL', key, i)
      end
    end
    oldest = floor
    if total <= 0 then
      redis.call('DEL', key)
      return 0, cur
    end
    redis.call('HSET', key, 't', total, 'o', oldest)
  end
  return total, oldest
end

local function add(key, total, oldest, slot, amount)
  redis.call('HINCRBY', key, slot, amount)
  redis.call('HSET', key, 't', total + amount, 'o', oldest)
  redis.call('PEXPIRE', key, (W + 1) * SLOT)
  return total + amount
end
`;

/** KEYS: requests hash, tokens hash. ARGV: rpm limit (-1 none), tpm limit (-1 none), tokens. */
const RESERVE_LUA = `${WINDOW_FNS}
local function untilFits(key, total, oldest, needed, limit)
  local excess = total + needed - limit
  if excess <= 0 then return 0 end
  local freed = 0
  for i = oldest, cur do
    local v = tonumber(redis.call('HGET', key, i))
    if v then
      freed = freed + v
      if freed >= excess then return (i + W) * SLOT - now end
    end
  end
  return W * SLOT
end

local function untilOldest(key, total, oldest)
  if total <= 0 then return 0 end
  for i = oldest, cur do
    local v = tonumber(redis.call('HGET', key, i))
    if v and v > 0 then return (i + W) * SLOT - now end
  end
  return 0
end

local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local rTotal, rOld, tTotal, tOld = 0, cur, 0, cur
local waitR, waitT = 0, 0
if rpm >= 0 then
  rTotal, rOld = load(KEYS[1])
  waitR = untilFits(KEYS[1], rTotal, rOld, 1, rpm)
end
if tpm >= 0 then
  tTotal, tOld = load(KEYS[2])
  waitT = untilFits(KEYS[2], tTotal, tOld, tokens, tpm)
end
local admitted = 0
if waitR == 0 and waitT == 0 then
  admitted = 1
  if rpm >= 0 then rTotal = add(KEYS[1], rTotal, rOld, cur, 1) end
  if tpm >= 0 and tokens > 0 then tTotal = add(KEYS[2], tTotal, tOld, cur, tokens) end
end
local resetR, resetT = waitR, waitT
if rpm >= 0 and resetR == 0 then resetR = untilOldest(KEYS[1], rTotal, rOld) end
if tpm >= 0 and resetT == 0 then resetT = untilOldest(KEYS[2], tTotal, tOld) end
return {admitted, rTotal, tTotal, resetR, resetT, cur}
`;

/** KEYS: requests hash, tokens hash. ARGV: slot, refund request (0/1), token delta (actual - reserved). */
const SETTLE_LUA = `${WINDOW_FNS}
local slot = tonumber(ARGV[1])
local refundReq = tonumber(ARGV[2])
local delta = tonumber(ARGV[3])
local function giveBack(key, amount)
  local total, oldest = load(key)
  if total <= 0 or slot < oldest or slot > cur then return end
  local v = tonumber(redis.call('HGET', key, slot)) or 0
  local back = math.min(v, amount)
  if back <= 0 then return end
  redis.call('HINCRBY', key, slot, -back)
  redis.call('HSET', key, 't', total - back)
end
if refundReq == 1 then giveBack(KEYS[1], 1) end
if delta < 0 then giveBack(KEYS[2], -delta) end
if delta > 0 then
  local total, oldest = load(KEYS[2])
  add(KEYS[2], total, oldest, cur, delta)
end
return 1
`;

type Reply = [number, number, number, number, number, number];

interface LimitCommands {
  inferRateReserve(kReq: string, kTok: string, rpm: number, tpm: number, tokens: number): Promise<Reply>;
  inferRateSettle(kReq: string, kTok: string, slot: number, refundRequest: number, delta: number): Promise<number>;
}

export interface RedisRateLimiterOptions {
  readonly url: string;
  /** Prefix of every key this limiter writes (tests use a unique one). */
  readonly prefix: string;
  /** Where a request goes while Redis cannot answer (fail open). */
  readonly fallback: RateLimiter;
  /** Told (at most every 30 s) when Redis fails and the fallback takes over. */
  readonly onWarn: (message: string, err: unknown) => void;
  /** Per-command bound, ms (default 1000). */
  readonly commandTimeoutMs?: number;
  /** Pause between the breaker's background probes while Redis is known to be slow, ms (default 200). */
  readonly probeIntervalMs?: number;
}

export interface RedisRateLimiter extends RateLimiter {
  /** The connection, shared with the fleet-wide replica slots. */
  readonly client: RedisClient;
  /** The circuit breaker in front of `client`, shared with the replica slots. */
  readonly breaker: RedisBreaker;
  /** Resolves once connected, on the first connection error, or after `ms` (the fallback serves meanwhile). */
  ready(ms: number): Promise<void>;
  /** True while requests are limited by this node's memory: not connected, or the breaker is open. */
  failingOpen(): boolean;
}

/** Passes on at most one warning per 30 s (a Redis outage would otherwise log once per request). */
export function throttledWarn(onWarn: (message: string, err: unknown) => void): (message: string, err: unknown) => void {
  let last = 0;
  return (message, err) => {
    const now = Date.now();
    if (now - last < 30_000) return;
    last = now;
    onWarn(message, err);
  };
}

// ioredis (about 7 MiB of heap and 30 MiB of RSS once loaded) is loaded only by a node that has a REDIS_URL.
const requireCjs = createRequire(import.meta.url);
const loadRedis = (): typeof RedisClient => (requireCjs('ioredis') as { Redis: typeof RedisClient }).Redis;

/**
 * RPM/TPM shared by every node through Redis: one atomic Lua round trip per admission, one
 * fire-and-forget per settlement. While Redis is unreachable it fails open to `fallback` (this node's
 * own in-memory counts) with a warning; it never fails the request.
 */
export function createRedisRateLimiter(opts: RedisRateLimiterOptions): RedisRateLimiter {
  const redis = new (loadRedis())(opts.url, {
    lazyConnect: false,
    enableOfflineQueue: false, // disconnected: fail at once, do not queue behind a dead server
    maxRetriesPerRequest: 0,
    commandTimeout: opts.commandTimeoutMs ?? 1000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  redis.defineCommand('inferRateReserve', { numberOfKeys: 2, lua: RESERVE_LUA });
  redis.defineCommand('inferRateSettle', { numberOfKeys: 2, lua: SETTLE_LUA });
  const cmd = redis as unknown as LimitCommands;
  const warn = throttledWarn(opts.onWarn);
  const breaker = createRedisBreaker({ probe: () => redis.ping(), probeIntervalMs: opts.probeIntervalMs });
  redis.on('error', (err: unknown) => warn('redis rate-limit store unreachable; limiting per node in memory until it is back', err));

  const keysOf = (keyId: string): [string, string] => [`${opts.prefix}:{${keyId}}:r`, `${opts.prefix}:{${keyId}}:t`];

  const failingOpen = (): boolean => redis.status !== 'ready' || breaker.state === 'open';

  return {
    client: redis,
    breaker,
    failingOpen,
    reserve(keyId, rpm, tpm, tokens) {
      // Unreachable, or known to be slow (breaker open): this node's own counts, with no wait at all.
      if (failingOpen()) return opts.fallback.reserve(keyId, rpm, tpm, tokens);
      const [kr, kt] = keysOf(keyId);
      return breaker
        .run(() => cmd.inferRateReserve(kr, kt, rpm ?? -1, tpm ?? -1, tokens))
        .then(
          (r): RateDecision => ({
            admitted: r[0] === 1,
            rpmLimit: rpm,
            tpmLimit: tpm,
            requestsUsed: r[1],
            tokensUsed: r[2],
            resetRequestsMs: r[3],
            resetTokensMs: r[4],
            retryAfterMs: Math.max(r[3], r[4]) * (r[0] === 1 ? 0 : 1),
            slot: r[5],
            store: 'redis',
          }),
          (err: unknown) => {
            if (!(err instanceof BreakerOpenError)) warn('redis rate-limit check failed; limiting per node in memory', err);
            return opts.fallback.reserve(keyId, rpm, tpm, tokens);
          },
        );
    },
    settle(keyId, d, refundRequest, tokenDelta) {
      if (d.store === 'memory') {
        opts.fallback.settle(keyId, d, refundRequest, tokenDelta);
        return;
      }
      if (!refundRequest && tokenDelta === 0) return;
      // The reservation simply stands until its window passes.
      if (failingOpen()) return;
      const [kr, kt] = keysOf(keyId);
      breaker
        .run(() => cmd.inferRateSettle(kr, kt, d.slot, refundRequest && d.rpmLimit !== null ? 1 : 0, d.tpmLimit === null ? 0 : tokenDelta))
        .catch((err: unknown) => {
          if (!(err instanceof BreakerOpenError)) warn('redis rate-limit settlement failed', err);
        });
    },
    ready(ms) {
      if (redis.status === 'ready') return Promise.resolve();
      // Connected, refused (fail open at once), or still trying after `ms`: serve either way.
      return new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          redis.off('ready', done);
          redis.off('error', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        redis.once('ready', done);
        redis.once('error', done);
      });
    },
    async close() {
      breaker.close();
      redis.disconnect();
      await opts.fallback.close();
    },
  };
}
