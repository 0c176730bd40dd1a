import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendRaw, type RawResponse } from '../helpers/raw-https.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * 404s (no route) and 405s (wrong method) of the REST adapter are requests of the caller's budget: they carry the
 * X-RateLimit headers, count under one key per caller shared by every such request, and past the limit are a 429.
 */

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_DEFAULT: '5', REDIS_URL: '' });
});
afterAll(() => app?.stop());

// Sent around the OpenAPI contract check: these requests are no operation, and the check would judge GET
// /domains/sync by GET /domains/{id}, which has no 405.
async function send(method: string, path: string, token?: string): Promise<RawResponse> {
  const outcome = await sendRaw(app.url, { method, path, headers: token ? { authorization: `Bearer ${token}` } : {}, timeoutMs: 10_000 });
  if (!outcome.response) throw new Error(`${method} ${path}: ${outcome.failure}`);
  return outcome.response;
}

function expectHeaders(res: RawResponse, remaining: string, where: string) {
  expect(res.headers['x-ratelimit-limit'], where).toBe('5');
  expect(res.headers['x-ratelimit-remaining'], where).toBe(remaining);
  const reset = Number(res.headers['x-ratelimit-reset']);
  expect(reset, where).toBeGreaterThan(Date.now() / 1000);
  expect(reset, where).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 61);
}

describe('unmatched REST requests and the rate limit', () => {
  it('404s and 405s carry the headers, share one count whatever the path, and answer 429 with Retry-After past the limit', async () => {
    const owner = await app.signUp('unmatched');
    const requests: Array<[string, string, number]> = [
      ['GET', '/api/v1/no-such-operation', 404],
      ['PUT', '/api/v1/api-keys/some-key', 405],
      ['GET', '/api/v1/another/unknown/path', 404],
      ['GET', '/api/v1/domains/sync', 405],
      ['GET', '/api/knowledge-base/upload', 404],
    ];
    for (const [i, [method, path, status]] of requests.entries()) {
      const res = await send(method, path, owner.token);
      expect(res.status, `${method} ${path}`).toBe(status);
      expectHeaders(res, String(4 - i), `${method} ${path}`);
    }
    const refused = await send('GET', '/api/v1/yet-another-path', owner.token);
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ success: false, error: { message: 'Rate limit exceeded', code: 'RATE_LIMITED', details: expect.any(String) } });
    expectHeaders(refused, '0', 'refused');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // A wrong method past the limit is the 429 too, without the 405's Allow.
    const wrongMethod = await send('GET', '/api/v1/domains/sync', owner.token);
    expect(wrongMethod.status).toBe(429);
    expect(wrongMethod.headers.allow).toBeUndefined();
    expect(Number(wrongMethod.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    // Not an operation's budget: the owner's real operations are unaffected.
    const list = await app.request('GET', '/api/v1/api-keys', { token: owner.token });
    expect(list.status).toBe(200);
    expect(list.headers['x-ratelimit-remaining']).toBe('4');
  });

  it('counts per caller: another owner and an anonymous client (by IP) have budgets of their own', async () => {
    const other = await app.signUp('unmatched-other');
    const mine = await send('DELETE', '/api/v1/domains/check-reserved', other.token);
    expect(mine.status).toBe(405);
    expect(mine.headers.allow).toBe('GET');
    expectHeaders(mine, '4', 'another owner');
    const anonymous = await send('GET', '/api/v1/nothing-here');
    expect(anonymous.status).toBe(404);
    expectHeaders(anonymous, '4', 'anonymous');
    // A missing document asset is an unknown route like any other, in the same count.
    const asset = await send('GET', '/api/v1/docs/assets/no-such-asset.js');
    expect(asset.status).toBe(404);
    expect(asset.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
    expectHeaders(asset, '3', 'asset');
  });

  it('documents (openapi.json, the docs page) carry the headers and share a budget of their own, then answer 429', async () => {
    const reader = await app.signUp('documents-reader');
    const paths = ['/api/v1/openapi.json', '/api/v1/docs', '/api/v1/openapi.json', '/api/v1/docs', '/api/v1/openapi.json'];
    for (const [i, path] of paths.entries()) {
      const res = await send('GET', path, reader.token);
      expect(res.status, path).toBe(200);
      expectHeaders(res, String(4 - i), path);
    }
    const refused = await send('GET', '/api/v1/openapi.json', reader.token);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ success: false, error: { code: 'RATE_LIMITED' } });
    expectHeaders(refused, '0', 'refused document');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Not the unmatched budget, nor an operation's.
    const unknown = await send('GET', '/api/v1/no-such-path', reader.token);
    expect(unknown.status).toBe(404);
    expectHeaders(unknown, '4', 'unmatched after documents');
  });
});
