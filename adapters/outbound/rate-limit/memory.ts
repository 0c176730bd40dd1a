/**
 * In-process sliding-log rate limiter.
 *
 * Per key we keep a ring buffer of the timestamps of allowed requests, oldest
 * first. Invariants (per entry):
 *   - the `size` live slots, read from `head`, are in non-decreasing time order;
 *   - size <= capacity <= limit;
 *   - a request is allowed iff fewer than `limit` live timestamps lie in
 *     (now - windowMs, now], so no window-length span ever holds more than
 *     `limit` allowed requests.
 * Expired timestamps are dropped from the head on each hit (found by binary
 * search), which keeps a hit at O(log limit) plus amortised O(1) growth.
 */
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

/** Above this limit the ring starts small and doubles, so a huge limit does not cost limit * 8 bytes up front. */
const EAGER_CAPACITY_MAX = 1024;
const GROWABLE_INITIAL_CAPACITY = 64;
const SWEEP_INTERVAL_MS = 60_000;

interface Log {
  buf: Float64Array;
  /** Physical index of the oldest live timestamp. */
  head: number;
  /** Number of live timestamps. */
  size: number;
  limit: number;
  /** Window of the most recent hit; the sweeper uses it to decide when the key is idle. */
  windowMs: number;
}

function initialCapacity(limit: number): number {
  return limit <= EAGER_CAPACITY_MAX ? limit : GROWABLE_INITIAL_CAPACITY;
}

/** Timestamp at logical position i (0 = oldest). Caller guarantees 0 <= i < size. */
function at(log: Log, i: number): number {
  let p = log.head + i;
  if (p >= log.buf.length) p -= log.buf.length;
  return log.buf[p]!;
}

/** Copies the newest `keep` live timestamps into a fresh buffer of `capacity` slots, oldest at index 0. */
function rebuild(log: Log, capacity: number, keep: number): void {
  const next = new Float64Array(capacity);
  const skip = log.size - keep;
  for (let i = 0; i < keep; i++) next[i] = at(log, skip + i);
  log.buf = next;
  log.head = 0;
  log.size = keep;
}

/** Logical index of the first timestamp > cutoff (size if none); valid because the log is time-ordered. */
function firstAfter(log: Log, cutoff: number): number {
  let lo = 0;
  let hi = log.size;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (at(log, mid) <= cutoff) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class MemoryRateLimiter implements RateLimiter {
  private readonly logs = new Map<string, Log>();
  private readonly now: () => number;
  private sweeper: ReturnType<typeof setInterval> | undefined;
  private closed = false;

  constructor(options: { now?: () => number } = {}) {
    this.now = options.now ?? Date.now;
    // unref'd so an idle limiter never keeps the process alive.
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  /** Number of keys currently tracked (for tests and diagnostics). */
  get size(): number {
    return this.logs.size;
  }

  async health() {
    return { store: 'memory' as const, ok: true, latencyMs: 0, error: null };
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision> {
    if (this.closed) throw new Error('rate limiter is closed');
    assertHitArgs(key, limit, windowMs);

    let log = this.logs.get(key);
    if (log === undefined) {
      log = { buf: new Float64Array(initialCapacity(limit)), head: 0, size: 0, limit, windowMs };
      this.logs.set(key, log);
    } else if (log.limit !== limit) {
      // Keep the newest min(size, limit) timestamps: that is enough to decide
      // "fewer than limit in the window" exactly under the new limit.
      const keep = Math.min(log.size, limit);
      rebuild(log, Math.max(initialCapacity(limit), keep), keep);
      log.limit = limit;
    }
    log.windowMs = windowMs;

    // A clock that steps backwards must not break time order; recording the
    // newest timestamp instead of an earlier one only makes the limiter stricter.
    let now = this.now();
    if (log.size > 0) now = Math.max(now, at(log, log.size - 1));

    const expired = firstAfter(log, now - windowMs);
    if (expired > 0) {
      log.head = (log.head + expired) % log.buf.length;
      log.size -= expired;
    }

    const allowed = log.size < limit;
    if (allowed) {
      // size < limit, so when full the buffer is below `limit` and may double (capped at limit).
      if (log.size === log.buf.length) rebuild(log, Math.min(log.buf.length * 2, limit), log.size);
      let p = log.head + log.size;
      if (p >= log.buf.length) p -= log.buf.length;
      log.buf[p] = now;
      log.size++;
    }
    return makeDecision(allowed, limit, log.size, at(log, 0), windowMs, now);
  }

  /**
   * Reads without pruning, so a look changes no later decision. Synchronous on purpose (the map cannot change
   * under the loop); `maxKeys` bounds it to a binary search per key.
   */
  async busiest(options: BusiestOptions): Promise<UsageSnapshot> {
    if (this.closed) throw new Error('rate limiter is closed');
    assertBusiestArgs(options);
    const cutoff = this.now() - options.windowMs;
    const entries: UsageEntry[] = [];
    let scanned = 0;
    for (const [key, log] of this.logs) {
      if (scanned === options.maxKeys) return { store: 'memory', entries: entries.sort(byUsage).slice(0, options.top), scanned, truncated: true };
      scanned++;
      if (options.keyPrefix !== undefined && !key.startsWith(options.keyPrefix)) continue;
      const first = firstAfter(log, cutoff);
      if (first === log.size) continue;
      const limit = options.limitOf(key);
      if (limit === undefined) continue;
      entries.push({ key, count: log.size - first, limit, oldestMs: at(log, first) });
    }
    return { store: 'memory', entries: entries.sort(byUsage).slice(0, options.top), scanned, truncated: false };
  }

  /** Drops keys with no timestamp left inside their window, so memory tracks active keys only. */
  sweep(): void {
    const now = this.now();
    for (const [key, log] of this.logs) {
      if (log.size === 0 || at(log, log.size - 1) <= now - log.windowMs) this.logs.delete(key);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
    this.logs.clear();
  }
}

export function createMemoryRateLimiter(options?: { now?: () => number }): RateLimiter {
  return new MemoryRateLimiter(options);
}
