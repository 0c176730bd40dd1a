/**
 * Rate limiter contract shared by the in-memory and Redis implementations.
 *
 * Both implementations are strict sliding logs: in no span of `windowMs`
 * milliseconds are more than `limit` requests allowed for one key, including
 * across what a fixed-window limiter would treat as a boundary.
 */

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  /** Requests left in the current window after this one (0 when refused). */
  remaining: number;
  /** Unix time in seconds (integer, rounded up) when the oldest counted request leaves the window, freeing a slot. */
  resetAt: number;
  /** Integer >= 1 when refused, 0 when allowed. */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  /** Counts one request against `key`; refused requests are NOT counted. */
  hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision>;
  /** Where counts live and whether that store answers now (admin status). Never throws. */
  health(): Promise<RateLimitStoreHealth>;
  /**
   * The keys nearest their limits now, read without counting anything. Bounded: at most `maxKeys` keys are read
   * (`truncated` says some were left unread), so a busy store costs the same as a full one.
   */
  busiest(options: BusiestOptions): Promise<UsageSnapshot>;
  close(): Promise<void>;
}

export interface BusiestOptions {
  windowMs: number;
  /** Upper bound on the keys read from the store (memory: iterated; Redis: returned by SCAN). */
  maxKeys: number;
  /** The limit a key is counted against, or undefined to leave the key out (not one of ours, or filtered away). */
  limitOf(key: string): number | undefined;
  /** Only keys that start with this (narrows the Redis SCAN pattern; the caller's key space, without the store's prefix). */
  keyPrefix?: string;
  /** How many entries to return. */
  top: number;
}

export interface UsageEntry {
  key: string;
  /** Requests counted in (now - windowMs, now]. */
  count: number;
  limit: number;
  /** Unix ms of the oldest counted request: a slot frees at oldestMs + windowMs. */
  oldestMs: number;
}

export interface UsageSnapshot {
  /** The store that answered (the Redis wrapper answers from its local fallback while Redis is down). */
  store: 'memory' | 'redis';
  /** Keys with a request in the window, highest count/limit first (then higher count, then key); at most `top`. */
  entries: UsageEntry[];
  /** Keys read. */
  scanned: number;
  /** True when the bound stopped the read before every key was seen. */
  truncated: boolean;
}

export interface RateLimitStoreHealth {
  store: 'memory' | 'redis';
  ok: boolean;
  latencyMs: number | null;
  error: string | null;
}

/**
 * Rejects arguments a sliding log cannot honour. Called by both implementations
 * so they fail the same way (a rejected promise, never a silent "allow").
 */
export function assertHitArgs(key: string, limit: number, windowMs: number): void {
  if (typeof key !== 'string') throw new TypeError('rate limit key must be a string');
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`rate limit must be a positive integer, got ${limit}`);
  }
  if (!Number.isFinite(windowMs) || windowMs <= 0) {
    throw new RangeError(`rate limit window must be a positive finite number of ms, got ${windowMs}`);
  }
}

/**
 * Builds a decision from the log state after the hit was applied.
 * `oldestMs` is the oldest timestamp still inside the window (there is always
 * one: either the request just recorded, or, when refused, `limit` >= 1 entries).
 */
export function makeDecision(allowed: boolean, limit: number, countInWindow: number, oldestMs: number, windowMs: number, nowMs: number): RateLimitDecision {
  const freesAtMs = oldestMs + windowMs;
  return {
    allowed,
    limit,
    remaining: allowed ? Math.max(0, limit - countInWindow) : 0,
    resetAt: Math.ceil(freesAtMs / 1000),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((freesAtMs - nowMs) / 1000)),
  };
}

export function assertBusiestArgs(options: BusiestOptions): void {
  if (!Number.isFinite(options.windowMs) || options.windowMs <= 0)
    throw new RangeError(`window must be a positive finite number of ms, got ${options.windowMs}`);
  if (!Number.isSafeInteger(options.maxKeys) || options.maxKeys < 1) throw new RangeError(`maxKeys must be a positive integer, got ${options.maxKeys}`);
  if (!Number.isSafeInteger(options.top) || options.top < 1) throw new RangeError(`top must be a positive integer, got ${options.top}`);
}

/** Nearest its limit first; ties by count, then by key so answers are stable. */
export function byUsage(a: UsageEntry, b: UsageEntry): number {
  return b.count / b.limit - a.count / a.limit || b.count - a.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}
