/**
 * Redis sliding-log rate limiter, shared by every instance pointed at the same Redis.
 *
 * One sorted set per key holds the allowed requests, scored by Redis server
 * time in microseconds. A single Lua script prunes, counts and records
 * atomically, so concurrent hits from any number of instances share one exact
 * count, and the server clock (not each instance's) defines the window.
 */
import { randomBytes } from 'node:crypto';
import { Redis, type Result } from 'ioredis';
import {
  assertBusiestArgs,
  assertHitArgs,
  type BusiestOptions,
  byUsage,
  makeDecision,
  type RateLimitDecision,
  type RateLimiter,
  type UsageEntry,
  type UsageSnapshot,
} from './rate-limiter.ts';

/** Upper bound on how long a hit may wait for Redis before rejecting (covers queued, unsent commands too). */
const COMMAND_TIMEOUT_MS = 2_000;
const CONNECT_TIMEOUT_MS = 2_000;
/** SCAN's COUNT: about how many slots Redis examines per call, so no single call holds it for long. */
const SCAN_COUNT = 500;
/** Redis may hold other data than ours: SCAN examines at most this many slots per key wanted, then stops (truncated). */
const SCAN_SLOTS_PER_KEY = 10;
/** Keys per pipeline (two commands each), so one round trip's reply stays small. */
const PIPELINE_KEYS = 500;

/** A literal for a SCAN MATCH pattern: the prefix is configuration and may hold glob characters. */
const escapeGlob = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&');

/**
 * KEYS[1] = sorted set; ARGV = limit, window in microseconds, window in ms
 * (integer, for PEXPIRE), unique member suffix.
 * Window is (now - window, now]: scores <= now - window are expired.
 * Returns {allowed 0|1, count in window after this hit, oldest score (us), now (us)}.
 * Microsecond scores stay exact doubles (~1.7e15 < 2^53) and survive Lua's
 * number-to-integer reply conversion unchanged.
 */
const SLIDING_LOG_SCRIPT = `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window_us = tonumber(ARGV[2])
local window_ms = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window_us)
local count = redis.call('ZCARD', key)
local allowed = 0
if count < limit then
  redis.call('ZADD', key, now, t[1] .. '.' .. t[2] .. ':' .. ARGV[4])
  redis.call('PEXPIRE', key, window_ms)
  count = count + 1
  allowed = 1
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {allowed, count, tonumber(oldest[2]), now}
`;

type ScriptReply = [number, number, number, number];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    rateLimitHit(key: string, limit: number, windowUs: number, windowMs: number, member: string): Result<ScriptReply, Context>;
  }
}

class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  private readonly keyPrefix: string;
  /** Random per instance plus a counter: members never collide, even for hits in the same microsecond. */
  private readonly instanceId = randomBytes(6).toString('hex');
  private seq = 0;
  private warned = false;

  constructor(options: { url: string; keyPrefix?: string }) {
    this.keyPrefix = options.keyPrefix ?? 'rl:';
    this.redis = new Redis(options.url, {
      // Commands issued before the first connect are queued, but a down Redis
      // flushes them after one failed retry, and commandTimeout bounds every
      // hit, so callers get a rejection instead of a hang.
      maxRetriesPerRequest: 1,
      connectTimeout: CONNECT_TIMEOUT_MS,
      commandTimeout: COMMAND_TIMEOUT_MS,
    });
    // Without an 'error' listener ioredis errors would be unhandled and crash
    // the process; warn once per outage and let ioredis keep reconnecting.
    this.redis.on('error', (err: Error) => {
      if (this.warned) return;
      this.warned = true;
      console.warn(`rate limiter: Redis error (${err.message}); hits will be rejected until it recovers`);
    });
    this.redis.on('ready', () => {
      this.warned = false;
    });
    this.redis.defineCommand('rateLimitHit', { numberOfKeys: 1, lua: SLIDING_LOG_SCRIPT });
  }

  async health() {
    const started = performance.now();
    try {
      await Promise.race([this.redis.ping(), new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 2 s')), 2_000).unref())]);
      return { store: 'redis' as const, ok: true, latencyMs: Math.round((performance.now() - started) * 100) / 100, error: null };
    } catch (error) {
      return { store: 'redis' as const, ok: false, latencyMs: null, error: error instanceof Error ? error.message.slice(0, 200) : 'failed' };
    }
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision> {
    assertHitArgs(key, limit, windowMs);
    this.seq = (this.seq + 1) % Number.MAX_SAFE_INTEGER;
    const [allowed, count, oldestUs, nowUs] = await this.redis.rateLimitHit(
      this.keyPrefix + key,
      limit,
      Math.round(windowMs * 1000),
      Math.max(1, Math.ceil(windowMs)),
      `${this.instanceId}:${this.seq}`,
    );
    return makeDecision(allowed === 1, limit, count, oldestUs / 1000, windowMs, nowUs / 1000);
  }

  /**
   * SCAN (bounded in calls and keys) over this store's prefix, then per key, in pipelines, the requests in the window
   * and the oldest of them. The window is measured on the Redis clock, as hits are.
   */
  async busiest(options: BusiestOptions): Promise<UsageSnapshot> {
    assertBusiestArgs(options);
    const pattern = `${escapeGlob(this.keyPrefix + (options.keyPrefix ?? ''))}*`;
    const maxCalls = Math.ceil((options.maxKeys * SCAN_SLOTS_PER_KEY) / SCAN_COUNT);
    // SCAN may return a key twice; a set keeps each once.
    const keys = new Set<string>();
    let cursor = '0';
    let calls = 0;
    let dropped = false;
    do {
      const [next, batch] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
      cursor = next;
      calls++;
      for (const stored of batch) {
        const key = stored.slice(this.keyPrefix.length);
        if (keys.has(key)) continue;
        if (keys.size === options.maxKeys) {
          dropped = true;
          break;
        }
        keys.add(key);
      }
    } while (cursor !== '0' && keys.size < options.maxKeys && calls < maxCalls);

    const candidates: Array<{ key: string; limit: number }> = [];
    for (const key of keys) {
      const limit = options.limitOf(key);
      if (limit !== undefined) candidates.push({ key, limit });
    }
    const entries: UsageEntry[] = [];
    if (candidates.length > 0) {
      const [seconds, micros] = await this.redis.time();
      const after = `(${Number(seconds) * 1_000_000 + Number(micros) - Math.round(options.windowMs * 1000)}`;
      for (let i = 0; i < candidates.length; i += PIPELINE_KEYS) {
        const chunk = candidates.slice(i, i + PIPELINE_KEYS);
        const pipeline = this.redis.pipeline();
        for (const { key } of chunk) {
          pipeline.zcount(this.keyPrefix + key, after, '+inf');
          pipeline.zrangebyscore(this.keyPrefix + key, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1);
        }
        const replies = (await pipeline.exec()) ?? [];
        chunk.forEach(({ key, limit }, j) => {
          const [countError, count] = replies[2 * j] ?? [];
          const [oldestError, oldest] = replies[2 * j + 1] ?? [];
          // A key of another type under our prefix answers WRONGTYPE; a key that expired between the two answers has no oldest.
          if (countError || oldestError || typeof count !== 'number' || count === 0 || !Array.isArray(oldest) || oldest.length < 2) return;
          entries.push({ key, count, limit, oldestMs: Number(oldest[1]) / 1000 });
        });
      }
    }
    return { store: 'redis', entries: entries.sort(byUsage).slice(0, options.top), scanned: keys.size, truncated: cursor !== '0' || dropped };
  }

  async close(): Promise<void> {
    // quit() waits for pending replies when connected; disconnect() when not,
    // since quit() would otherwise wait on a connection that never comes.
    if (this.redis.status === 'ready') {
      await this.redis.quit().catch(() => this.redis.disconnect());
    } else {
      this.redis.disconnect();
    }
  }
}

export function createRedisRateLimiter(options: { url: string; keyPrefix?: string }): RateLimiter {
  return new RedisRateLimiter(options);
}
