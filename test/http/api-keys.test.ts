import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let interfaceA: string;

beforeAll(async () => {
  app = await startTestApp();
  a = await app.signUp('a');
  b = await app.signUp('b');
  interfaceA = (await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'Shop help' } })).body.data.chatInterface.id;
});
afterAll(() => app?.stop());

async function createKey(name = 'widget') {
  const res = await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name, chatInterfaceId: interfaceA } });
  expect(res.status).toBe(201);
  return res.body.data as { apiKey: { id: string; prefix: string }; key: string };
}

describe('API keys', () => {
  it('creates a key shown once: svc_ prefix, only the hash stored', async () => {
    const { apiKey, key } = await createKey();
    expect(key).toMatch(/^svc_[0-9A-Za-z]{38}$/);
    expect(apiKey).toMatchObject({ name: 'widget', chatInterfaceId: interfaceA, active: true, lastUsedAt: null, prefix: key.slice(0, 10) });
    const got = await app.request('GET', `/api/v1/api-keys/${apiKey.id}`, { token: a.token });
    expect(got.status).toBe(200);
    expect(got.text).not.toContain(key);
    const list = await app.request('GET', '/api/v1/api-keys', { token: a.token });
    expect(list.text).not.toContain(key);
    expect(list.body.data.count).toBe(list.body.data.apiKeys.length);
    const row = await app.deps.database.db.selectFrom('api_keys').selectAll().where('id', '=', apiKey.id).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(key.slice(4));
  });

  it("validates input and refuses another owner's interface with 404", async () => {
    const missingName = await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { chatInterfaceId: interfaceA } });
    expect(missingName.status).toBe(400);
    expect(missingName.body.error.details).toContain('name');
    const foreign = await app.request('POST', '/api/v1/api-keys', { token: b.token, body: { name: 'steal', chatInterfaceId: interfaceA } });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.message).toBe('Chat interface not found');
    const bogus = await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name: 'x', chatInterfaceId: 'not-a-uuid' } });
    expect(bogus.status).toBe(404);
  });

  it('another owner gets 404 on read, update and delete', async () => {
    const { apiKey } = await createKey('private');
    for (const [method, body] of [['GET'], ['PATCH', { name: 'mine now' }], ['DELETE']] as const) {
      const res = await app.request(method, `/api/v1/api-keys/${apiKey.id}`, { token: b.token, body });
      expect(res.status, method).toBe(404);
      expect(res.body.error).toMatchObject({ code: 'NOT_FOUND', message: 'API key not found' });
    }
    expect((await app.request('GET', '/api/v1/api-keys', { token: b.token })).body.data.count).toBe(0);
    expect((await app.request('GET', `/api/v1/api-keys/${apiKey.id}`, { token: a.token })).body.data.apiKey.name).toBe('private');
  });

  it('renames and deactivates; a deactivated or deleted key fails with 401 on the very next request', async () => {
    const { apiKey, key } = await createKey('to-deactivate');
    // A valid key on an owner-only route is 403 (authenticated, wrong kind); an invalid one is 401.
    const before = await app.request('GET', '/api/v1/auth/me', { token: key });
    expect(before.status).toBe(403);
    const used = await app.request('GET', `/api/v1/api-keys/${apiKey.id}`, { token: a.token });
    expect(used.body.data.apiKey.lastUsedAt).not.toBeNull();

    const renamed = await app.request('PATCH', `/api/v1/api-keys/${apiKey.id}`, { token: a.token, body: { name: 'renamed' } });
    expect(renamed.body.data.apiKey).toMatchObject({ name: 'renamed', active: true });
    const off = await app.request('PATCH', `/api/v1/api-keys/${apiKey.id}`, { token: a.token, body: { active: false } });
    expect(off.body.data.apiKey.active).toBe(false);
    expect((await app.request('GET', '/api/v1/auth/me', { token: key })).status).toBe(401);
    await app.request('PATCH', `/api/v1/api-keys/${apiKey.id}`, { token: a.token, body: { active: true } });
    expect((await app.request('GET', '/api/v1/auth/me', { token: key })).status).toBe(403);

    const del = await app.request('DELETE', `/api/v1/api-keys/${apiKey.id}`, { token: a.token });
    expect(del.body).toEqual({ success: true, data: { deleted: true, id: apiKey.id }, version: 'v1' });
    expect((await app.request('GET', '/api/v1/auth/me', { token: key })).status).toBe(401);
    expect((await app.request('GET', `/api/v1/api-keys/${apiKey.id}`, { token: a.token })).status).toBe(404);
  });

  it('an update with nothing to change is a 400', async () => {
    const { apiKey } = await createKey('noop');
    const res = await app.request('PATCH', `/api/v1/api-keys/${apiKey.id}`, { token: a.token, body: {} });
    expect(res.status).toBe(400);
  });

  it('an API key cannot manage keys (owner routes need a session)', async () => {
    const { key } = await createKey('limited');
    const res = await app.request('GET', '/api/v1/api-keys', { token: key });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
  });

  it('deleting the chat interface deletes its keys', async () => {
    const ci = (await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'Temporary' } })).body.data.chatInterface.id;
    const res = await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name: 'tmp', chatInterfaceId: ci } });
    await app.request('DELETE', `/api/v1/chat-interfaces/${ci}`, { token: a.token });
    expect((await app.request('GET', `/api/v1/api-keys/${res.body.data.apiKey.id}`, { token: a.token })).status).toBe(404);
    expect((await app.request('GET', '/api/v1/auth/me', { token: res.body.data.key })).status).toBe(401);
  });
});
