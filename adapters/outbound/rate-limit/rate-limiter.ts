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
  close(): Promise<void>;
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
