import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRedisRateLimiter } from './redis.ts';
import type { RateLimiter } from './rate-limiter.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `rl-test:${randomBytes(6).toString('hex')}:`;
const WINDOW = 60_000;

let admin: Redis;
const limiters: RateLimiter[] = [];
function make(url = REDIS_URL): RateLimiter {
  const l = createRedisRateLimiter({ url, keyPrefix: PREFIX });
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
