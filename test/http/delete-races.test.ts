import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';

/**
 * A write that races the delete of what it belongs to (a key for an interface being deleted, a change to a knowledge
 * base being deleted, a visitor's first message to an interface being deleted) finds its parent gone: a 404 in the
 * envelope, never a 500. Each round starts the writes and the deletes together; which wins varies, so every answer
 * must be one of the outcomes a client can meet in sequence.
 */

let app: TestApp;
let owner: { token: string };
let other: { token: string };

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_DEFAULT: '10000', RATE_LIMIT_CHAT: '10000' });
  owner = await app.signUp('races');
  other = await app.signUp('races-other');
});
afterAll(() => app?.stop());

const ROUNDS = 8;

function expectOneOf(res: TestResponse, allowed: number[], where: string) {
  expect(allowed, `${where}: ${res.status} ${res.text}`).toContain(res.status);
  if (res.status === 404) expect(res.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
}

async function interfaceWithKnowledgeBase(token: string) {
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', { token, body: { name: 'race' } });
  expect(kb.status, kb.text).toBe(201);
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token, body: { name: 'race', configId: kb.body.data.config.id } });
  expect(ci.status, ci.text).toBe(201);
  return { configId: kb.body.data.config.id as string, id: ci.body.data.chatInterface.id as string, slug: ci.body.data.chatInterface.slug as string };
}

describe('writes racing the delete of their parent', () => {
  it('a new API key and a knowledge-base change racing the deletes are 2xx or 404', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { configId, id } = await interfaceWithKnowledgeBase(owner.token);
      const [key, patch, tools, deletedInterface, deletedConfig] = await Promise.all([
        app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'k', chatInterfaceId: id } }),
        app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}`, { token: owner.token, body: { temperature: 0.5 } }),
        app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}/tools`, {
          token: owner.token,
          body: { tools: [{ name: 'lead_capture', enabled: true }] },
        }),
        app.request('DELETE', `/api/v1/chat-interfaces/${id}`, { token: owner.token }),
        app.request('DELETE', `/api/v1/knowledge-base/configs/${configId}`, { token: owner.token }),
      ]);
      expectOneOf(key, [201, 404], `round ${round}, POST api-keys`);
      expectOneOf(patch, [200, 404], `round ${round}, PATCH config`);
      expectOneOf(tools, [200, 404], `round ${round}, PATCH tools`);
      expect(deletedInterface.status, deletedInterface.text).toBe(200);
      expect(deletedConfig.status, deletedConfig.text).toBe(200);
      // Nothing of the round is left, and the other owner sees none of it.
      expect((await app.request('GET', `/api/v1/chat-interfaces/${id}`, { token: owner.token })).status).toBe(404);
      expect((await app.request('GET', `/api/v1/knowledge-base/configs/${configId}`, { token: owner.token })).status).toBe(404);
      expect((await app.request('GET', `/api/v1/knowledge-base/configs/${configId}`, { token: other.token })).status).toBe(404);
    }
  });

  it("a visitor's first message racing the interface's delete is answered or 401/404, never a 500", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { id, slug } = await interfaceWithKnowledgeBase(owner.token);
      const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'widget', chatInterfaceId: id } });
      expect(key.status, key.text).toBe(201);
      const warm = await app.request('POST', `/api/v1/chat/${slug}`, { token: key.body.data.key, body: { message: 'hello' } });
      expect(warm.status, warm.text).toBe(200);
      const [first, second, deleted] = await Promise.all([
        app.request('POST', `/api/v1/chat/${slug}`, { token: key.body.data.key, body: { message: 'hello again' } }),
        app.request('POST', `/api/v1/chat/${slug}`, { token: key.body.data.key, body: { message: 'and again' } }),
        app.request('DELETE', `/api/v1/chat-interfaces/${id}`, { token: owner.token }),
      ]);
      expectOneOf(first, [200, 401, 404], `round ${round}, chat`);
      expectOneOf(second, [200, 401, 404], `round ${round}, chat`);
      expect(deleted.status, deleted.text).toBe(200);
    }
  });

  it('the same race over Server-Sent Events ends with a NOT_FOUND error event or an answer, never INTERNAL_ERROR', async () => {
    const stream = (slug: string, key: string, message: string) =>
      app.request('POST', `/api/v1/chat/${slug}`, { token: key, body: { message }, headers: { accept: 'text/event-stream' } });
    for (let round = 0; round < ROUNDS; round++) {
      const { id, slug } = await interfaceWithKnowledgeBase(owner.token);
      const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'widget', chatInterfaceId: id } });
      expect(key.status, key.text).toBe(201);
      expect((await stream(slug, key.body.data.key, 'hello')).status).toBe(200);
      const [first, second, deleted] = await Promise.all([
        stream(slug, key.body.data.key, 'hello again'),
        stream(slug, key.body.data.key, 'and again'),
        app.request('DELETE', `/api/v1/chat-interfaces/${id}`, { token: owner.token }),
      ]);
      expect(deleted.status, deleted.text).toBe(200);
      for (const res of [first, second]) {
        expectOneOf(res, [200, 401, 404], `round ${round}, streamed chat`);
        if (res.status !== 200) continue;
        const events = res.text
          .split('\n')
          .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
          .map((line) => JSON.parse(line.slice(6)));
        const last = events.at(-1);
        if (last?.type === 'error') expect(last.error.code, res.text).toBe('NOT_FOUND');
        else expect(last?.type, res.text).toBe('complete');
      }
    }
  });
});
