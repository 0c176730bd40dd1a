import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMemoryRateLimiter, MemoryRateLimiter } from './memory.ts';
import type { RateLimiter } from './rate-limiter.ts';

const WINDOW = 60_000;
const T0 = 1_700_000_000_000; // arbitrary fixed epoch ms

function clock(start = T0) {
  let t = start;
  return {
    now: () => t,
    set: (ms: number) => {
      t = start + ms;
    },
  };
}

const limiters: RateLimiter[] = [];
function make(now: () => number): RateLimiter {
  const l = createMemoryRateLimiter({ now });
  limiters.push(l);
  return l;
}

afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
  vi.useRealTimers();
});

/** Deterministic PRNG so a failing property run can be reproduced. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

describe('memory rate limiter', () => {
  it('allows exactly limit requests, then refuses with remaining 0 and retryAfter >= 1', async () => {
    const c = clock();
    const rl = make(c.now);
    for (let i = 0; i < 5; i++) {
      const d = await rl.hit('k', 5, WINDOW);
      expect(d).toMatchObject({ allowed: true, limit: 5, remaining: 4 - i, retryAfterSeconds: 0 });
    }
    const refused = await rl.hit('k', 5, WINDOW);
    expect(refused.allowed).toBe(false);
    expect(refused.remaining).toBe(0);
    expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refused.retryAfterSeconds).toBe(60);
    expect(Number.isInteger(refused.retryAfterSeconds)).toBe(true);
  });

  it('does not count refused requests', async () => {
    const c = clock();
    const rl = make(c.now);
    await rl.hit('k', 2, WINDOW); // t=0
    c.set(10_000);
    await rl.hit('k', 2, WINDOW); // t=10s
    for (let s = 11; s < 60; s++) {
      c.set(s * 1000);
      expect((await rl.hit('k', 2, WINDOW)).allowed).toBe(false);
    }
    // Only the t=0 hit has expired; had refusals been counted, this would still be refused.
    c.set(60_000);
    const d = await rl.hit('k', 2, WINDOW);
    expect(d.allowed).toBe(true);
    expect(d.remaining).toBe(0);
  });

  it('slides: no 2x burst across a window boundary', async () => {
    const c = clock();
    const rl = make(c.now);
    for (const t of [0, 30_000, 59_000]) {
      c.set(t);
      expect((await rl.hit('k', 3, WINDOW)).allowed).toBe(true);
    }
    c.set(61_000);
    expect((await rl.hit('k', 3, WINDOW)).allowed).toBe(true);
    const refused = await rl.hit('k', 3, WINDOW);
    expect(refused.allowed).toBe(false);
    // Oldest in window is t=30s, so a slot frees at t=90s.
    expect(refused.resetAt).toBe(Math.ceil((T0 + 90_000) / 1000));
    expect(refused.retryAfterSeconds).toBe(29);

    c.set(89_900);
    expect((await rl.hit('k', 3, WINDOW)).allowed).toBe(false);
    c.set(90_100);
    expect((await rl.hit('k', 3, WINDOW)).allowed).toBe(true);
    expect((await rl.hit('k', 3, WINDOW)).allowed).toBe(false);
  });

  it('treats the window as (now - window, now]: a hit exactly windowMs old has expired', async () => {
    const c = clock();
    const rl = make(c.now);
    await rl.hit('k', 1, WINDOW);
    c.set(WINDOW - 1);
    expect((await rl.hit('k', 1, WINDOW)).allowed).toBe(false);
    c.set(WINDOW);
    expect((await rl.hit('k', 1, WINDOW)).allowed).toBe(true);
  });

  it.each([
    { seed: 1, limit: 3, maxGap: 5_000 },
    { seed: 2, limit: 10, maxGap: 2_000 },
    { seed: 3, limit: 50, maxGap: 500 },
    { seed: 4, limit: 2_000, maxGap: 20 }, // exercises the growable buffer (limit > eager max)
  ])('never allows more than limit in any window span (seed $seed, limit $limit)', async ({ seed, limit, maxGap }) => {
    const rand = mulberry32(seed);
    const c = clock();
    const rl = make(c.now);
    const allowedAt: number[] = [];
    let t = 0;
    let allowedCount = 0;
    let refusedCount = 0;
    let windowStart = 0; // index of the oldest allowed hit inside (t - window, t]
    while (t < 5 * 60_000) {
      // Mix bursts (gap 0) with spread-out hits, including fractional ms.
      t += rand() < 0.3 ? 0 : rand() * maxGap;
      c.set(t);
      const d = await rl.hit('k', limit, WINDOW);
      if (d.allowed) {
        allowedAt.push(t);
        allowedCount++;
      } else {
        refusedCount++;
        expect(d.remaining).toBe(0);
        expect(d.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      }
      // Reference model: allowed iff fewer than limit prior allowed hits lie in (t - window, t].
      while (allowedAt[windowStart] !== undefined && allowedAt[windowStart]! <= t - WINDOW) windowStart++;
      const inWindow = allowedAt.length - windowStart;
      if (d.allowed) expect(d.remaining).toBe(limit - inWindow);
      else expect(inWindow).toBe(limit);
    }
    expect(allowedCount).toBeGreaterThan(limit);
    expect(refusedCount).toBeGreaterThan(0);
    // The sliding property, checked over every allowed hit.
    let lo = 0;
    for (let i = 0; i < allowedAt.length; i++) {
      const ti = allowedAt[i]!;
      while (allowedAt[lo]! <= ti - WINDOW) lo++;
      expect(i - lo + 1).toBeLessThanOrEqual(limit);
    }
  });

  it('returns resetAt as integer Unix seconds in the future', async () => {
    const c = clock(T0 + 123); // not on a second boundary
    const rl = make(c.now);
    const d = await rl.hit('k', 2, 1_500);
    expect(Number.isInteger(d.resetAt)).toBe(true);
    expect(d.resetAt * 1000).toBeGreaterThan(c.now());
    expect(d.resetAt).toBe(Math.ceil((T0 + 123 + 1_500) / 1000));

    const real = make(Date.now);
    const r = await real.hit('k', 1, 10_000);
    expect(Number.isInteger(r.resetAt)).toBe(true);
    expect(r.resetAt).toBeGreaterThan(Date.now() / 1000);
    expect(r.resetAt).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 10);
  });

  it('keeps keys independent', async () => {
    const c = clock();
    const rl = make(c.now);
    expect((await rl.hit('a', 1, WINDOW)).allowed).toBe(true);
    expect((await rl.hit('a', 1, WINDOW)).allowed).toBe(false);
    expect((await rl.hit('b', 1, WINDOW)).allowed).toBe(true);
    expect((await rl.hit('b', 1, WINDOW)).allowed).toBe(false);
  });

  it('handles a limit change for a key, keeping the requests already counted', async () => {
    const c = clock();
    const rl = make(c.now);
    for (let i = 0; i < 3; i++) {
      c.set(i * 1000);
      expect((await rl.hit('k', 3, WINDOW)).allowed).toBe(true);
    }
    expect((await rl.hit('k', 3, WINDOW)).allowed).toBe(false);

    // Raised: the 3 earlier hits still count.
    const up = await rl.hit('k', 5, WINDOW);
    expect(up).toMatchObject({ allowed: true, limit: 5, remaining: 1 });
    expect((await rl.hit('k', 5, WINDOW)).allowed).toBe(true);
    expect((await rl.hit('k', 5, WINDOW)).allowed).toBe(false);

    // Lowered below the current count: refused until enough expire.
    const down = await rl.hit('k', 2, WINDOW);
    expect(down.allowed).toBe(false);
    c.set(WINDOW + 1_500); // t=0 and t=1s have expired; the three hits at t=2s remain
    expect((await rl.hit('k', 2, WINDOW)).allowed).toBe(false);
    c.set(WINDOW + 2_000); // everything from t<=2s has expired
    const after = await rl.hit('k', 2, WINDOW);
    expect(after).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
  });

  it('does not preallocate a huge limit, and stays exact over 200,000 hits on one key', async () => {
    const c = clock();
    const rl = make(c.now);
    const heapBefore = process.memoryUsage().arrayBuffers;
    // 1000 keys with limit 1e6 would need 8 GB if allocated eagerly.
    for (let k = 0; k < 1000; k++) await rl.hit(`key${k}`, 1_000_000, WINDOW);
    expect(process.memoryUsage().arrayBuffers - heapBefore).toBeLessThan(50 * 1024 * 1024);

    for (let i = 0; i < 200_000; i++) {
      c.set(i * 0.1);
      const d = await rl.hit('hot', 1_000_000, WINDOW);
      if (!d.allowed || d.remaining !== 1_000_000 - (i + 1)) throw new Error(`unexpected decision at ${i}`);
    }
  });

  it('sweeps idle keys and close() clears the sweeper', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const c = clock();
    const rl = new MemoryRateLimiter({ now: c.now });
    limiters.push(rl);
    expect(vi.getTimerCount()).toBe(1);

    await rl.hit('short', 1, 1_000);
    await rl.hit('long', 1, 10 * WINDOW);
    expect(rl.size).toBe(2);
    c.set(WINDOW);
    vi.advanceTimersByTime(60_000);
    expect(rl.size).toBe(1); // 'short' is idle, 'long' still has a live entry

    await rl.close();
    expect(vi.getTimerCount()).toBe(0);
    expect(rl.size).toBe(0);
    await expect(rl.hit('k', 1, WINDOW)).rejects.toThrow(/closed/);
  });

  it('rejects invalid arguments', async () => {
    const rl = make(Date.now);
    await expect(rl.hit('k', 0, WINDOW)).rejects.toThrow(RangeError);
    await expect(rl.hit('k', 1.5, WINDOW)).rejects.toThrow(RangeError);
    await expect(rl.hit('k', 1, 0)).rejects.toThrow(RangeError);
    await expect(rl.hit('k', 1, Number.NaN)).rejects.toThrow(RangeError);
  });

  it('stays strict when the clock steps backwards', async () => {
    const c = clock();
    const rl = make(c.now);
    c.set(30_000);
    expect((await rl.hit('k', 2, WINDOW)).allowed).toBe(true);
    c.set(0);
    expect((await rl.hit('k', 2, WINDOW)).allowed).toBe(true);
    c.set(61_000); // the second hit was recorded at 30s, so both are still in the window
    expect((await rl.hit('k', 2, WINDOW)).allowed).toBe(false);
    c.set(90_000);
    expect((await rl.hit('k', 2, WINDOW)).allowed).toBe(true);
  });
});

describe('memory rate limiter: busiest', () => {
  const everyKey = (limit: number) => () => limit;

  it('ranks keys by count/limit with exact counts and the oldest request in the window', async () => {
    const c = clock();
    const rl = make(c.now);
    for (let i = 0; i < 3; i++) await rl.hit('a', 4, WINDOW); // 3/4
    c.set(5_000);
    for (let i = 0; i < 2; i++) await rl.hit('b', 2, WINDOW); // 2/2, oldest at 5 s
    await rl.hit('c', 10, WINDOW); // 1/10
    const limits: Record<string, number> = { a: 4, b: 2, c: 10 };
    const snapshot = await rl.busiest({ windowMs: WINDOW, maxKeys: 100, top: 10, limitOf: (k) => limits[k] });
    expect(snapshot).toEqual({
      store: 'memory',
      entries: [
        { key: 'b', count: 2, limit: 2, oldestMs: T0 + 5_000 },
        { key: 'a', count: 3, limit: 4, oldestMs: T0 },
        { key: 'c', count: 1, limit: 10, oldestMs: T0 + 5_000 },
      ],
      scanned: 3,
      truncated: false,
    });
    expect((await rl.busiest({ windowMs: WINDOW, maxKeys: 100, top: 1, limitOf: (k) => limits[k] })).entries.map((e) => e.key)).toEqual(['b']);
  });

  it('breaks ratio ties by count, then by key', async () => {
    const rl = make(clock().now);
    await rl.hit('z', 2, WINDOW);
    await rl.hit('y', 2, WINDOW);
    for (let i = 0; i < 2; i++) await rl.hit('x', 4, WINDOW);
    const limits: Record<string, number> = { x: 4, y: 2, z: 2 };
    const { entries } = await rl.busiest({ windowMs: WINDOW, maxKeys: 100, top: 10, limitOf: (k) => limits[k] });
    expect(entries.map((e) => e.key)).toEqual(['x', 'y', 'z']);
  });

  it('leaves out expired requests, keys limitOf does not know and keys outside keyPrefix', async () => {
    const c = clock();
    const rl = make(c.now);
    await rl.hit('p:old', 5, WINDOW);
    c.set(30_000);
    await rl.hit('p:old', 5, WINDOW);
    await rl.hit('p:unknown', 5, WINDOW);
    await rl.hit('q:other', 5, WINDOW);
    c.set(WINDOW); // the hit at 0 has just expired: (now - window, now]
    const snapshot = await rl.busiest({ windowMs: WINDOW, maxKeys: 100, top: 10, keyPrefix: 'p:', limitOf: (k) => (k === 'p:unknown' ? undefined : 5) });
    expect(snapshot.entries).toEqual([{ key: 'p:old', count: 1, limit: 5, oldestMs: T0 + 30_000 }]);
    expect(snapshot.scanned).toBe(3);
    c.set(WINDOW + 30_000);
    expect((await rl.busiest({ windowMs: WINDOW, maxKeys: 100, top: 10, limitOf: everyKey(5) })).entries).toEqual([]);
  });

  it('reads at most maxKeys keys and says so', async () => {
    const rl = make(clock().now);
    for (let k = 0; k < 5; k++) await rl.hit(`k${k}`, 5, WINDOW);
    const cut = await rl.busiest({ windowMs: WINDOW, maxKeys: 3, top: 10, limitOf: everyKey(5) });
    expect(cut).toMatchObject({ scanned: 3, truncated: true });
    expect(cut.entries).toHaveLength(3);
    expect(await rl.busiest({ windowMs: WINDOW, maxKeys: 5, top: 10, limitOf: everyKey(5) })).toMatchObject({ scanned: 5, truncated: false });
  });

  it('counts nothing by looking', async () => {
    const c = clock();
    const rl = make(c.now);
    await rl.hit('k', 2, WINDOW);
    c.set(WINDOW - 1);
    for (let i = 0; i < 3; i++) await rl.busiest({ windowMs: WINDOW, maxKeys: 10, top: 10, limitOf: everyKey(2) });
    expect(await rl.hit('k', 2, WINDOW)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('stays quick over 100,000 keys', async () => {
    const rl = make(clock().now);
    for (let k = 0; k < 100_000; k++) await rl.hit(`key${k}`, 10, WINDOW);
    const started = performance.now();
    const snapshot = await rl.busiest({ windowMs: WINDOW, maxKeys: 10_000, top: 20, limitOf: everyKey(10) });
    expect(performance.now() - started).toBeLessThan(500);
    expect(snapshot).toMatchObject({ scanned: 10_000, truncated: true });
    expect(snapshot.entries).toHaveLength(20);
  });

  it('rejects invalid arguments and answers nothing once closed', async () => {
    const rl = make(Date.now);
    await expect(rl.busiest({ windowMs: 0, maxKeys: 1, top: 1, limitOf: everyKey(1) })).rejects.toThrow(RangeError);
    await expect(rl.busiest({ windowMs: WINDOW, maxKeys: 0, top: 1, limitOf: everyKey(1) })).rejects.toThrow(RangeError);
    await expect(rl.busiest({ windowMs: WINDOW, maxKeys: 1, top: 0, limitOf: everyKey(1) })).rejects.toThrow(RangeError);
    await rl.close();
    await expect(rl.busiest({ windowMs: WINDOW, maxKeys: 1, top: 1, limitOf: everyKey(1) })).rejects.toThrow(/closed/);
  });
});
