import { describe, expect, it } from 'vitest';
import { startTestApp } from '../helpers/test-app.ts';

// Each case starts its own app with its own limits.
describe('rate limits: proxies, batches and aliases', () => {
  it('with TRUST_PROXY, the client IP is the rightmost X-Forwarded-For entry (a spoofed left part does not reset limits)', async () => {
    const limited = await startTestApp({ TRUST_PROXY: '1', RATE_LIMIT_DEFAULT: '3' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await limited.request('GET', '/api/v1/health/hosting', { headers: { 'x-forwarded-for': `10.9.8.${i}, 198.51.100.7` } });
        statuses.push(res.status);
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429]);
    } finally {
      await limited.stop();
    }
  });

  it('a public operation counts per client IP whoever calls: a credential sent along buys no budget of its own', async () => {
    const limited = await startTestApp({ RATE_LIMIT_DEFAULT: '4' });
    try {
      const owner = await limited.signUp('guesser');
      const guess = (token?: string) =>
        limited.request('POST', '/api/v1/auth/sign-in', { token, body: { email: 'victim@example.com', password: 'a wrong guess' } });
      const anonymous = [];
      for (let i = 0; i < 5; i++) anonymous.push((await guess()).status);
      expect(anonymous).toEqual([401, 401, 401, 401, 429]);
      const withSession = await guess(owner.token);
      expect(withSession.status, withSession.text).toBe(429);
      const overTrpc = await limited.request('POST', '/trpc/auth.signIn', { token: owner.token, body: { email: 'victim@example.com', password: 'guess' } });
      expect(overTrpc.status).toBe(429);
      // The owner's own operations still count against the owner, not the IP.
      expect((await limited.request('GET', '/api/v1/auth/me', { token: owner.token })).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });

  it('every call of a tRPC batch and every GraphQL alias counts against the rate limit; bodies and batches are capped', async () => {
    const limited = await startTestApp({ RATE_LIMIT_DEFAULT: '3', JSON_BODY_LIMIT_BYTES: '4096' });
    try {
      const owner = await limited.signUp('batch');
      const paths = Array.from({ length: 5 }, () => 'auth.me').join(',');
      const batch = await limited.request('GET', `/trpc/${paths}?batch=1&input=${encodeURIComponent(JSON.stringify({}))}`, { token: owner.token });
      const results = batch.body as Array<{ error?: { data?: { code?: string } } }>;
      expect(results.filter((r) => r.error?.data?.code === 'TOO_MANY_REQUESTS')).toHaveLength(2);
      const huge = Array.from({ length: 25 }, () => 'translations.get').join(',');
      expect((await limited.request('GET', `/trpc/${huge}?batch=1`)).status).toBe(400);
      const aliases = Array.from({ length: 5 }, (_, i) => `a${i}: apiKeys { id }`).join(' ');
      const gql = await limited.request('POST', '/graphql', { token: owner.token, body: { query: `{ ${aliases} }` } });
      expect(gql.body.errors.filter((e: { extensions: { code: string } }) => e.extensions.code === 'RATE_LIMITED').length).toBeGreaterThanOrEqual(2);
      const big = await limited.request('POST', '/trpc/auth.signIn', { body: { email: 'x@example.com', password: 'y'.repeat(10_000) } });
      expect(big.status).toBe(413);
      const bigGql = await limited.request('POST', '/graphql', { body: { query: `{ me { id } } # ${'y'.repeat(10_000)}` } });
      expect(bigGql.status).toBe(413);
    } finally {
      await limited.stop();
    }
  });
});
