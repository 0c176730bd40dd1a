import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendRaw, type RawResponse } from '../helpers/raw-https.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * A path that matches a literal route (`/domains/sync`, `/domains/check-reserved`, `/knowledge-base/documents/bulk-delete`)
 * belongs to the literal routes alone: another method is a 405 naming theirs, never the `{id}` route beside them.
 */

let app: TestApp;
let owner: { token: string };

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_DEFAULT: '1000' });
  owner = await app.signUp('literal-paths');
});
afterAll(() => app?.stop());

// Sent around the OpenAPI contract check: these requests are no operation, and the check would judge GET
// /domains/sync by GET /domains/{id}, which has no 405.
async function notAnOperation(method: string, path: string, token?: string): Promise<RawResponse> {
  const outcome = await sendRaw(app.url, { method, path, headers: token ? { authorization: `Bearer ${token}` } : {}, timeoutMs: 10_000 });
  if (!outcome.response) throw new Error(`${method} ${path}: ${outcome.failure}`);
  return outcome.response;
}

function expect405(res: RawResponse, allow: string, where: string) {
  expect(res.status, where).toBe(405);
  expect(res.headers.allow, where).toBe(allow);
  expect(res.body, where).toEqual({ success: false, error: { message: 'Method not allowed', code: 'METHOD_NOT_ALLOWED', details: expect.any(String) } });
}

describe('literal paths beside parameterised ones', () => {
  it('GET /api/v1/domains/sync is 405 with Allow: POST, not a domain lookup', async () => {
    expect405(await notAnOperation('GET', '/api/v1/domains/sync', owner.token), 'POST', 'GET sync');
    expect405(await notAnOperation('GET', '/api/v1/domains/sync/', owner.token), 'POST', 'GET sync/');
    expect405(await notAnOperation('DELETE', '/api/v1/domains/sync', owner.token), 'POST', 'DELETE sync');
  });

  it('check-reserved and route-public answer other methods with a 405 naming GET alone', async () => {
    for (const method of ['POST', 'PATCH', 'DELETE']) {
      expect405(await notAnOperation(method, '/api/v1/domains/check-reserved', owner.token), 'GET', `${method} check-reserved`);
      expect405(await notAnOperation(method, '/api/v1/domains/route-public', owner.token), 'GET', `${method} route-public`);
    }
  });

  it('bulk-delete answers other methods with a 405 naming POST alone', async () => {
    for (const method of ['GET', 'DELETE']) {
      expect405(await notAnOperation(method, '/api/v1/knowledge-base/documents/bulk-delete', owner.token), 'POST', `${method} bulk-delete`);
    }
  });

  it('the literal operations and the parameterised ones still serve their own requests', async () => {
    const reserved = await app.request('GET', '/api/v1/domains/check-reserved?domain=free.literal-paths.test');
    expect(reserved.status, reserved.text).toBe(200);
    expect(reserved.body.data.domain).toBe('free.literal-paths.test');
    expect((await app.request('POST', '/api/v1/domains/sync')).status).toBe(401);
    const missing = await app.request('GET', '/api/v1/domains/00000000-0000-4000-8000-000000000000', { token: owner.token });
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).not.toBe('Route not found');
    const deleted = await app.request('DELETE', '/api/v1/knowledge-base/documents/00000000-0000-4000-8000-000000000000', { token: owner.token });
    expect(deleted.status).toBe(404);
    expect(deleted.body.error.message).not.toBe('Route not found');
  });

  it('a malformed %-escape in a path parameter reaches the operation: 401 without credentials, then its own refusal', async () => {
    for (const path of ['/api/v1/chat-interfaces/%FF', '/api/v1/chat-interfaces/%E0%A4%A', '/api/v1/chat-interfaces/%ED%A0%80', '/api/v1/translations/%ZZ']) {
      const anonymous = await notAnOperation('GET', path);
      if (!path.includes('translations')) expect(anonymous.status, path).toBe(401);
      const res = await notAnOperation('GET', path, owner.token);
      expect([400, 404], `${path}: ${res.text}`).toContain(res.status);
      expect((res.body as { error: { message: string } }).error.message, path).not.toBe('Route not found');
    }
  });

  it('legacy unversioned paths keep their behaviour: their own method is served flat, another is a 404', async () => {
    const collections = await app.request('GET', '/api/knowledge-base/collections/list', { token: owner.token });
    expect(collections.status, collections.text).toBe(200);
    expect(collections.body).toMatchObject({ success: true, collections: expect.any(Array) });
    expect(collections.body.version).toBeUndefined();
    for (const [method, path] of [
      ['GET', '/api/knowledge-base/upload'],
      ['POST', '/api/knowledge-base/documents'],
      ['DELETE', '/api/knowledge-base/collections/list'],
    ] as const) {
      const res = await notAnOperation(method, path, owner.token);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.headers.allow, `${method} ${path}`).toBeUndefined();
    }
  });
});
