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

/**
 * All or nothing over N windows. KEYS: each window's requests hash and tokens hash. ARGV: tokens, then each window's
 * rpm and tpm limits (-1: none). Replies {admitted, slot, then per window: requests used, tokens used, ms until the
 * requests fit (else until the oldest expires), the same for tokens}.
 */
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

local tokens = tonumber(ARGV[1])
local n = #KEYS / 2
local ws = {}
local admitted = 1
for w = 1, n do
  local s = { kr = KEYS[2 * w - 1], kt = KEYS[2 * w], rpm = tonumber(ARGV[2 * w]), tpm = tonumber(ARGV[2 * w + 1]),
    rTotal = 0, rOld = cur, tTotal = 0, tOld = cur, waitR = 0, waitT = 0 }
  if s.rpm >= 0 then
    s.rTotal, s.rOld = load(s.kr)
    s.waitR = untilFits(s.kr, s.rTotal, s.rOld, 1, s.rpm)
  end
  if s.tpm >= 0 then
    s.tTotal, s.tOld = load(s.kt)
    s.waitT = untilFits(s.kt, s.tTotal, s.tOld, tokens, s.tpm)
  end
  if s.waitR > 0 or s.waitT > 0 then admitted = 0 end
  ws[w] = s
end
local out = {admitted, cur}
for w = 1, n do
  local s = ws[w]
  if admitted == 1 then
    if s.rpm >= 0 then s.rTotal = add(s.kr, s.rTotal, s.rOld, cur, 1) end
    if s.tpm >= 0 and tokens > 0 then s.tTotal = add(s.kt, s.tTotal, s.tOld, cur, tokens) end
  end
  local resetR, resetT = s.waitR, s.waitT
  if s.rpm >= 0 and resetR == 0 then resetR = untilOldest(s.kr, s.rTotal, s.rOld) end
  if s.tpm >= 0 and resetT == 0 then resetT = untilOldest(s.kt, s.tTotal, s.tOld) end
  out[#out + 1] = s.rTotal
  out[#out + 1] = s.tTotal
  out[#out + 1] = resetR
  out[#out + 1] = resetT
end
return out
`;

/**
 * Settles N windows. KEYS: each window's requests hash and tokens hash. ARGV: each window's slot, refund request
 * (0/1), token delta (actual - reserved; 0: none).
 */
const SETTLE_LUA = `${WINDOW_FNS}
local function giveBack(key, slot, amount)
  local total, oldest = load(key)
  if total <= 0 or slot < oldest or slot > cur then return end
  local v = tonumber(redis.call('HGET', key, slot)) or 0
  local back = math.min(v, amount)
  if back <= 0 then return end
  redis.call('HINCRBY', key, slot, -back)
  redis.call('HSET', key, 't', total - back)
end
for w = 1, #KEYS / 2 do
  local kr, kt = KEYS[2 * w - 1], KEYS[2 * w]
  local slot = tonumber(ARGV[3 * w - 2])
  local refundReq = tonumber(ARGV[3 * w - 1])
  local delta = tonumber(ARGV[3 * w])
  if refundReq == 1 then giveBack(kr, slot, 1) end
  if delta < 0 then giveBack(kt, slot, -delta) end
  if delta > 0 then
    local total, oldest = load(kt)
    add(kt, total, oldest, cur, delta)
  end
end
return 1
`;

interface LimitCommands {
  /** (number of keys, keys..., args...): see RESERVE_LUA and SETTLE_LUA. */
  inferRateReserve(...args: (string | number)[]): Promise<number[]>;
  inferRateSettle(...args: (string | number)[]): Promise<number>;
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

/** Whether `needed` more fits in a window holding `used` under `limit` (the scripts' own test). */
const fits = (limit: number | null, used: number, needed: number): boolean => limit === null || used + needed <= limit;

/**
 * RPM/TPM shared by every node through Redis: one atomic Lua round trip per admission (over all its windows: the key's
 * and its tenant's), one fire-and-forget per settlement. The windows of one admission live under different hash tags,
 * so the store is one Redis server (a primary with replicas), not Redis Cluster. While Redis is unreachable it fails
 * open to `fallback` (this node's own in-memory counts) with a warning; it never fails the request.
 */
export function createRedisRateLimiter(opts: RedisRateLimiterOptions): RedisRateLimiter {
  const redis = new (loadRedis())(opts.url, {
    lazyConnect: false,
    enableOfflineQueue: false, // disconnected: fail at once, do not queue behind a dead server
    maxRetriesPerRequest: 0,
    commandTimeout: opts.commandTimeoutMs ?? 1000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  // No numberOfKeys: each call passes its own count (two keys per window).
  redis.defineCommand('inferRateReserve', { lua: RESERVE_LUA });
  redis.defineCommand('inferRateSettle', { lua: SETTLE_LUA });
  const cmd = redis as unknown as LimitCommands;
  const warn = throttledWarn(opts.onWarn);
  const breaker = createRedisBreaker({ probe: () => redis.ping(), probeIntervalMs: opts.probeIntervalMs });
  redis.on('error', (err: unknown) => warn('redis rate-limit store unreachable; limiting per node in memory until it is back', err));

  const requestsKey = (id: string): string => `${opts.prefix}:{${id}}:r`;
  const tokensKey = (id: string): string => `${opts.prefix}:{${id}}:t`;

  const failingOpen = (): boolean => redis.status !== 'ready' || breaker.state === 'open';

  return {
    client: redis,
    breaker,
    failingOpen,
    reserve(windows, tokens) {
      // Unreachable, or known to be slow (breaker open): this node's own counts, with no wait at all.
      if (failingOpen()) return opts.fallback.reserve(windows, tokens);
      const n = windows.length;
      const args: (string | number)[] = new Array(1 + 3 * n + 1);
      args[0] = 2 * n;
      args[1 + 2 * n] = tokens;
      for (let i = 0; i < n; i++) {
        const { id, rpm, tpm } = windows[i]!;
        args[1 + 2 * i] = requestsKey(id);
        args[2 + 2 * i] = tokensKey(id);
        args[2 + 2 * n + 2 * i] = rpm ?? -1;
        args[3 + 2 * n + 2 * i] = tpm ?? -1;
      }
      return breaker
        .run(() => cmd.inferRateReserve(...args))
        .then(
          (r): RateDecision[] => {
            const admitted = r[0] === 1;
            const decisions: RateDecision[] = new Array(n);
            for (let i = 0; i < n; i++) {
              const { rpm, tpm } = windows[i]!;
              const at = 2 + 4 * i;
              const resetR = r[at + 2]!;
              const resetT = r[at + 3]!;
              // Refused: a window's reset is its wait when it had no room; a window with room waits for nothing.
              const waitR = admitted || fits(rpm, r[at]!, 1) ? 0 : resetR;
              const waitT = admitted || fits(tpm, r[at + 1]!, tokens) ? 0 : resetT;
              decisions[i] = {
                admitted,
                rpmLimit: rpm,
                tpmLimit: tpm,
                requestsUsed: r[at]!,
                tokensUsed: r[at + 1]!,
                resetRequestsMs: resetR,
                resetTokensMs: resetT,
                retryAfterMs: Math.max(waitR, waitT),
                slot: r[1]!,
                store: 'redis',
              };
            }
            return decisions;
          },
          (err: unknown) => {
            if (!(err instanceof BreakerOpenError)) warn('redis rate-limit check failed; limiting per node in memory', err);
            return opts.fallback.reserve(windows, tokens);
          },
        );
    },
    settle(charges, refundRequest, tokenDelta) {
      if (charges.length === 0) return;
      // One admission's charges share a store.
      if (charges[0]!.d.store === 'memory') {
        opts.fallback.settle(charges, refundRequest, tokenDelta);
        return;
      }
      if (!refundRequest && tokenDelta === 0) return;
      // The reservation simply stands until its window passes.
      if (failingOpen()) return;
      const n = charges.length;
      const args: (string | number)[] = new Array(1 + 5 * n);
      args[0] = 2 * n;
      for (let i = 0; i < n; i++) {
        const { id, d } = charges[i]!;
        args[1 + 2 * i] = requestsKey(id);
        args[2 + 2 * i] = tokensKey(id);
        args[1 + 2 * n + 3 * i] = d.slot;
        args[2 + 2 * n + 3 * i] = refundRequest && d.rpmLimit !== null ? 1 : 0;
        args[3 + 2 * n + 3 * i] = d.tpmLimit === null ? 0 : tokenDelta;
      }
      breaker
        .run(() => cmd.inferRateSettle(...args))
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
