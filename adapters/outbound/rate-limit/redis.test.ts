import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../logger.ts';
import { withFallback } from './fallback.ts';
import { createMemoryRateLimiter } from './memory.ts';
import { createRedisRateLimiter } from './redis.ts';
import type { RateLimiter } from './rate-limiter.ts';

/**
 * A logical database of this file's own: the suite's other files fill database 0 with their apps' keys while this one
 * runs beside them, and busiest() examines a bounded number of slots (for 10 keys wanted, one SCAN of 500), so a
 * key of ours could be missed there and an exact answer could not be asserted.
 */
const REDIS_DATABASE = 9;
const REDIS_URL = (() => {
  const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  url.pathname = `/${REDIS_DATABASE}`;
  return url.toString();
})();
const PREFIX = `rl-test:${randomBytes(6).toString('hex')}:`;
const WINDOW = 60_000;

let admin: Redis;
const limiters: RateLimiter[] = [];
function make(url = REDIS_URL, keyPrefix = PREFIX): RateLimiter {
  const l = createRedisRateLimiter({ url, keyPrefix });
  limiters.push(l);
  return l;
}

beforeAll(() => {
  admin = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
});

afterAll(async () => {
  const keys = await admin.keys(`${PREFIX}*`);
  if (keys.length > 0) await admin.del(...keys);
  await admin.quit();
});

describe('redis rate limiter', () => {
  it('allows exactly limit requests, then refuses', async () => {
    const rl = make();
    for (let i = 0; i < 4; i++) {
      const d = await rl.hit('exact', 4, WINDOW);
      expect(d).toMatchObject({ allowed: true, limit: 4, remaining: 3 - i, retryAfterSeconds: 0 });
    }
    for (let i = 0; i < 3; i++) {
      const d = await rl.hit('exact', 4, WINDOW);
      expect(d).toMatchObject({ allowed: false, limit: 4, remaining: 0 });
      expect(d.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(d.retryAfterSeconds).toBeLessThanOrEqual(60);
    }
    // Refused hits are not recorded, and the key carries the prefix and a TTL.
    expect(await admin.zcard(`${PREFIX}exact`)).toBe(4);
    const ttl = await admin.pttl(`${PREFIX}exact`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(WINDOW);
  });

  it('slides: a slot frees when the oldest hit leaves the window', async () => {
    const rl = make();
    expect((await rl.hit('slide', 2, 400)).allowed).toBe(true);
    await new Promise((r) => setTimeout(r, 250));
    expect((await rl.hit('slide', 2, 400)).allowed).toBe(true);
    expect((await rl.hit('slide', 2, 400)).allowed).toBe(false);
    await new Promise((r) => setTimeout(r, 200)); // first hit expired, second still in window
    expect((await rl.hit('slide', 2, 400)).allowed).toBe(true);
    expect((await rl.hit('slide', 2, 400)).allowed).toBe(false);
  });

  it('shares one count between two instances', async () => {
    const a = make();
    const b = make();
    let allowed = 0;
    for (let i = 0; i < 12; i++) {
      const d = await (i % 2 === 0 ? a : b).hit('shared', 5, WINDOW);
      if (d.allowed) allowed++;
    }
    expect(allowed).toBe(5);
  });

  it('is atomic under concurrent hits', async () => {
    const a = make();
    const b = make();
    const decisions = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? a : b).hit('concurrent', 20, WINDOW)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(20);
    const remainings = decisions
      .filter((d) => d.allowed)
      .map((d) => d.remaining)
      .sort((x, y) => x - y);
    expect(remainings).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(await admin.zcard(`${PREFIX}concurrent`)).toBe(20);
  });

  it('returns sane remaining and resetAt', async () => {
    const rl = make();
    const before = Date.now();
    const first = await rl.hit('sane', 3, 10_000);
    expect(first.remaining).toBe(2);
    expect(Number.isInteger(first.resetAt)).toBe(true);
    // Redis runs on this machine, so its clock matches ours to well under a second.
    expect(first.resetAt).toBeGreaterThanOrEqual(Math.floor((before + 10_000) / 1000));
    expect(first.resetAt).toBeLessThanOrEqual(Math.ceil((Date.now() + 10_000) / 1000) + 1);
    await rl.hit('sane', 3, 10_000);
    await rl.hit('sane', 3, 10_000);
    const refused = await rl.hit('sane', 3, 10_000);
    expect(refused.allowed).toBe(false);
    expect(refused.resetAt).toBe(first.resetAt); // still waiting for the first hit to expire
    expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(9);
    expect(refused.retryAfterSeconds).toBeLessThanOrEqual(10);
  });

  it('keeps keys independent', async () => {
    const rl = make();
    expect((await rl.hit('ind-a', 1, WINDOW)).allowed).toBe(true);
    expect((await rl.hit('ind-a', 1, WINDOW)).allowed).toBe(false);
    expect((await rl.hit('ind-b', 1, WINDOW)).allowed).toBe(true);
  });

  it('rejects quickly instead of hanging when Redis is unreachable', async () => {
    const rl = make('redis://127.0.0.1:1');
    const start = Date.now();
    await expect(rl.hit('down', 1, WINDOW)).rejects.toThrow(Error);
    await expect(rl.hit('down', 1, WINDOW)).rejects.toThrow(Error);
    expect(Date.now() - start).toBeLessThan(5_000);
  });
});

describe('redis rate limiter: busiest', () => {
  const everyKey = (limit: number) => () => limit;

  it('ranks keys by count/limit with exact counts, on the Redis clock', async () => {
    const rl = make(REDIS_URL, `${PREFIX}busy-rank:`);
    const before = Date.now();
    for (let i = 0; i < 3; i++) await rl.hit('a', 4, WINDOW);
    for (let i = 0; i < 2; i++) await rl.hit('b', 2, WINDOW);
    await rl.hit('c', 10, WINDOW);
    const limits: Record<string, number> = { a: 4, b: 2, c: 10 };
    const snapshot = await rl.busiest({ windowMs: WINDOW, maxKeys: 1_000, top: 10, limitOf: (k) => limits[k] });
    expect(snapshot).toMatchObject({ store: 'redis', scanned: 3, truncated: false });
    expect(snapshot.entries.map(({ key, count, limit }) => ({ key, count, limit }))).toEqual([
      { key: 'b', count: 2, limit: 2 },
      { key: 'a', count: 3, limit: 4 },
      { key: 'c', count: 1, limit: 10 },
    ]);
    // Redis runs on this machine, so its clock matches ours to well under a second.
    for (const entry of snapshot.entries) {
      expect(entry.oldestMs).toBeGreaterThanOrEqual(before - 1_000);
      expect(entry.oldestMs).toBeLessThanOrEqual(Date.now() + 1_000);
    }
    const a = snapshot.entries.find((e) => e.key === 'a')!;
    expect(a.oldestMs).toBeLessThanOrEqual(snapshot.entries.find((e) => e.key === 'c')!.oldestMs);
    expect((await rl.busiest({ windowMs: WINDOW, maxKeys: 1_000, top: 1, limitOf: (k) => limits[k] })).entries.map((e) => e.key)).toEqual(['b']);
  });

  it('counts only the window, and leaves out unknown keys, other prefixes and keys of another type', async () => {
    const rl = make(REDIS_URL, `${PREFIX}busy-filter:`);
    await rl.hit('p:short', 5, 300);
    await rl.hit('p:long', 5, WINDOW);
    await rl.hit('p:unknown', 5, WINDOW);
    await rl.hit('q:other', 5, WINDOW);
    await admin.set(`${PREFIX}busy-filter:p:string`, 'not a sorted set');
    await new Promise((r) => setTimeout(r, 350));
    // p:short's hit is older than a 300 ms window now, though its key may still exist.
    const snapshot = await rl.busiest({ windowMs: 300, maxKeys: 1_000, top: 10, keyPrefix: 'p:', limitOf: (k) => (k === 'p:unknown' ? undefined : 5) });
    expect(snapshot.entries).toEqual([]);
    const wide = await rl.busiest({ windowMs: WINDOW, maxKeys: 1_000, top: 10, keyPrefix: 'p:', limitOf: (k) => (k === 'p:unknown' ? undefined : 5) });
    expect(wide.entries.map((e) => e.key)).toEqual(['p:long']);
    expect(wide.scanned).toBeGreaterThanOrEqual(3); // p:long, p:unknown, p:string (and p:short until it expires)
  });

  it('matches its key prefix literally, glob characters included', async () => {
    const odd = make(REDIS_URL, `${PREFIX}gl*b[1]?:`);
    const lookalike = make(REDIS_URL, `${PREFIX}glXb1Y:`);
    await odd.hit('mine', 5, WINDOW);
    await lookalike.hit('theirs', 5, WINDOW);
    const snapshot = await odd.busiest({ windowMs: WINDOW, maxKeys: 1_000, top: 10, limitOf: everyKey(5) });
    expect(snapshot.entries.map((e) => e.key)).toEqual(['mine']);
    expect(snapshot.scanned).toBe(1);
  });

  it('reads at most maxKeys keys and says so', async () => {
    const rl = make(REDIS_URL, `${PREFIX}busy-cap:`);
    await Promise.all(Array.from({ length: 30 }, (_, i) => rl.hit(`k${i}`, 5, WINDOW)));
    const cut = await rl.busiest({ windowMs: WINDOW, maxKeys: 10, top: 100, limitOf: everyKey(5) });
    // Other test files share this Redis, so one SCAN call may see fewer than 10 of ours; never more.
    expect(cut.scanned).toBeLessThanOrEqual(10);
    expect(cut.entries.length).toBe(cut.scanned);
    expect(cut.truncated).toBe(true);
    const all = await rl.busiest({ windowMs: WINDOW, maxKeys: 1_000, top: 100, limitOf: everyKey(5) });
    expect(all).toMatchObject({ scanned: 30, truncated: false });
  });

  it('counts nothing by looking', async () => {
    const rl = make(REDIS_URL, `${PREFIX}busy-look:`);
    await rl.hit('k', 2, WINDOW);
    for (let i = 0; i < 3; i++) await rl.busiest({ windowMs: WINDOW, maxKeys: 10, top: 10, limitOf: everyKey(2) });
    expect(await rl.hit('k', 2, WINDOW)).toMatchObject({ allowed: true, remaining: 0 });
    expect(await admin.zcard(`${PREFIX}busy-look:k`)).toBe(2);
  });

  it('behind the fallback: Redis answers while it is up, this instance’s counts while it is down', async () => {
    const logger = createLogger('silent');
    const up = withFallback(make(REDIS_URL, `${PREFIX}busy-up:`), createMemoryRateLimiter(), logger);
    limiters.push(up);
    await up.hit('k', 3, WINDOW);
    expect(await up.busiest({ windowMs: WINDOW, maxKeys: 10, top: 10, limitOf: everyKey(3) })).toMatchObject({
      store: 'redis',
      entries: [{ key: 'k', count: 1, limit: 3 }],
    });

    const down = withFallback(make('redis://127.0.0.1:1'), createMemoryRateLimiter(), logger);
    limiters.push(down);
    await down.hit('k', 3, WINDOW);
    await down.hit('k', 3, WINDOW);
    const started = Date.now();
    expect(await down.busiest({ windowMs: WINDOW, maxKeys: 10, top: 10, limitOf: everyKey(3) })).toMatchObject({
      store: 'memory',
      entries: [{ key: 'k', count: 2, limit: 3 }],
      scanned: 1,
      truncated: false,
    });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
