import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

describe('rate limits (in memory)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_DEFAULT: '5', REDIS_URL: '' });
  });
  afterAll(() => app?.stop());

  it('sends the headers on every limited response and answers 429 with Retry-After past the limit', async () => {
    const owner = await app.signUp('rl');
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 7; i++) {
      last = await app.request('GET', '/api/v1/api-keys', { token: owner.token });
      statuses.push(last.status);
      expect(last.headers['x-ratelimit-limit']).toBe('5');
      const reset = Number(last.headers['x-ratelimit-reset']);
      expect(reset).toBeGreaterThan(Date.now() / 1000);
      expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 61);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(last!.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(last!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(last!.body.error.code).toBe('RATE_LIMITED');

    // Per caller and per endpoint: another owner, and another endpoint of the same owner, are unaffected.
    const other = await app.signUp('rl-other');
    expect((await app.request('GET', '/api/v1/api-keys', { token: other.token })).status).toBe(200);
    const me = await app.request('GET', '/api/v1/auth/me', { token: owner.token });
    expect(me.status).toBe(200);
    expect(me.headers['x-ratelimit-remaining']).toBe('4');
  });

  it('counts a body refused before its procedure runs, with the headers, and answers 429 past the limit', async () => {
    const owner = await app.signUp('rl-body');
    const refusals = [
      { rawBody: '{"name":', headers: { 'content-type': 'application/json' } },
      { rawBody: '[]', headers: { 'content-type': 'application/json' } },
      { rawBody: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
    ];
    const seen: Array<[number, string | undefined]> = [];
    for (const refusal of [...refusals, ...refusals]) {
      const res = await app.request('POST', '/api/v1/api-keys', { token: owner.token, ...refusal });
      seen.push([res.status, res.headers['x-ratelimit-remaining'] as string | undefined]);
      expect(res.headers['x-ratelimit-limit']).toBe('5');
    }
    expect(seen).toEqual([
      [400, '4'],
      [400, '3'],
      [415, '2'],
      [400, '1'],
      [400, '0'],
      [429, '0'],
    ]);
  });

  it('limits anonymous callers by IP, and errors like 401 carry the headers too', async () => {
    const res = await app.request('GET', '/api/v1/chat-interfaces');
    expect(res.status).toBe(401);
    expect(res.headers['x-ratelimit-limit']).toBe('5');
  });
});

describe.runIf(process.env.REDIS_URL)('rate limits shared through Redis', () => {
  let first: TestApp;
  let second: TestApp;
  beforeAll(async () => {
    // Two listeners on one database and one Redis: what two instances behind a load balancer look like.
    const shared = { RATE_LIMIT_DEFAULT: '6', RATE_LIMIT_KEY_PREFIX: `rl:shared:${randomBytes(4).toString('hex')}:` };
    first = await startTestApp(shared);
    second = await startTestApp(shared);
  });
  afterAll(async () => {
    await first?.stop();
    await second?.stop();
  });

  it('two instances share one count', async () => {
    // A public route keyed by client IP: 127.0.0.1 for both listeners.
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const app = i % 2 === 0 ? first : second;
      const res = await app.request('GET', '/api/v1/translations/de');
      statuses.push(res.status);
    }
    const allowed = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s === 429).length).toBe(8 - allowed);
    // Both listeners count into one shared window: exactly 6 pass, wherever they landed.
    expect(allowed).toBe(6);
  });
});
