import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appRouter } from '../../routers/app-router.ts';
import { buildRouteTable } from '../../adapters/inbound/rest/routes.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Every operation that needs a credential, called without one or with a made-up one, answers 401 in the error
 * envelope (and, as every response in these tests, as the OpenAPI document says): none forgets its guard.
 */

let app: TestApp;
const SOME_ID = '00000000-0000-4000-8000-000000000000';

beforeAll(async () => {
  app = await startTestApp({ CRON_SECRET: 'cron-secret-0123456789', RATE_LIMIT_DEFAULT: '100000' });
});
afterAll(async () => {
  await app?.stop();
});

const guarded = buildRouteTable(appRouter).routes.filter((r) => !['public', 'billingSignature'].includes(r.meta.auth ?? 'public'));

describe('credentials are required', () => {
  it('covers the areas built so far', () => {
    const paths = guarded.map((r) => r.path);
    for (const prefix of ['/api/v1/bookings', '/api/v1/toolhub', '/api/v1/support/tickets', '/api/v1/admin/status', '/api/v1/domains']) {
      expect(
        paths.some((p) => p.startsWith(prefix)),
        prefix,
      ).toBe(true);
    }
  });

  it.each(guarded.map((r) => [`${r.method} ${r.path}`, r] as const))('%s without or with a made-up credential is a 401', async (_name, route) => {
    const path = route.path.replace(/\{[^}]+\}/g, route.path.includes('/chat/{slug}') ? 'some-slug' : SOME_ID);
    const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : {};
    for (const token of [undefined, 'made-up-token']) {
      const res = await app.request(route.method, path, { ...(token ? { token } : {}), ...(body ? { body } : {}) });
      expect(res.status, `${route.method} ${path} ${token ?? 'no credential'}: ${res.text}`).toBe(401);
      expect(res.body.success).toBe(false);
      expect(res.body.error.code).toBe('UNAUTHORIZED');
    }
  });
});
