import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Save-time address checks: a literal private address, or a name resolving to one, is refused (400 naming the
 * field); a name that does not resolve is saved with a warning and left to the check at each call. Offline:
 * names under the reserved `.invalid` TLD never resolve, and `localhost` resolves to loopback.
 */

const unresolved = (field: string, host: string) => `${field}: ${host} did not resolve; it will be checked again at each call`;
const PRIVATE_URLS = ['http://localhost:3000/api/chat', 'http://10.1.2.3/api/chat', 'http://[::1]:8080/api/chat', 'http://169.254.169.254/latest'];

let app: TestApp;
let owner: { token: string; ownerId: string };

beforeAll(async () => {
  app = await startTestApp();
  owner = await app.signUp('save-addresses');
  // Webhooks are for enterprise accounts.
  await app.deps.database.db.updateTable('owners').set({ plan: 'enterprise' }).where('id', '=', owner.ownerId).execute();
});

afterAll(async () => {
  await app?.stop();
});

describe('chat interface endpointUrl', () => {
  it('a name that does not resolve is saved with a warning, on create and update; the chat call checks it again', async () => {
    const created = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'Not live yet', endpointUrl: 'https://example-not-yet-live.invalid/api/chat' },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.chatInterface.endpointUrl).toBe('https://example-not-yet-live.invalid/api/chat');
    expect(created.body.data.warnings).toEqual([unresolved('endpointUrl', 'example-not-yet-live.invalid')]);
    const id = created.body.data.chatInterface.id as string;

    const updated = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, {
      token: owner.token,
      body: { endpointUrl: 'https://other-not-yet-live.invalid/chat' },
    });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.data.warnings).toEqual([unresolved('endpointUrl', 'other-not-yet-live.invalid')]);

    // A save with nothing to say carries no warnings at all.
    const renamed = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, { token: owner.token, body: { name: 'Renamed' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).not.toHaveProperty('warnings');
    const publicLiteral = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, { token: owner.token, body: { endpointUrl: 'https://8.8.8.8/chat' } });
    expect(publicLiteral.status).toBe(200);
    expect(publicLiteral.body.data).not.toHaveProperty('warnings');

    await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, { token: owner.token, body: { endpointUrl: 'https://example-not-yet-live.invalid/api/chat' } });
    const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'k', chatInterfaceId: id } });
    const chat = await app.request('POST', `/api/v1/chat/${created.body.data.chatInterface.slug}`, { token: key.body.data.key, body: { message: 'hi' } });
    expect(chat.status).toBe(502);
    expect(chat.body.error.code).toBe('UPSTREAM_CONNECTION_FAILED');
  });

  it('private literals and names resolving to private addresses are still refused with 400 naming the field', async () => {
    const { body } = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Target' } });
    const id = body.data.chatInterface.id as string;
    for (const endpointUrl of PRIVATE_URLS) {
      const created = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Private', endpointUrl } });
      expect(created.status, `${endpointUrl}: ${created.text}`).toBe(400);
      expect(created.body.error.code).toBe('VALIDATION_FAILED');
      expect(created.body.error.details).toMatch(/^endpointUrl: /);
      const updated = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, { token: owner.token, body: { endpointUrl } });
      expect(updated.status, `${endpointUrl}: ${updated.text}`).toBe(400);
      expect(updated.body.error.details).toMatch(/^endpointUrl: /);
    }
  });
});

describe('enterprise webhook url', () => {
  const base = '/api/v1/enterprise/webhooks';

  it('a name that does not resolve is saved with a warning, on create and update; Validate still says it is not reachable', async () => {
    const created = await app.request('POST', base, { token: owner.token, body: { url: 'https://hooks-not-yet-live.invalid/hook', events: ['webhook.test'] } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.warnings).toEqual([unresolved('url', 'hooks-not-yet-live.invalid')]);
    expect(created.body.data.secret).toMatch(/^whsec_/);
    const id = created.body.data.webhook.id as string;

    const updated = await app.request('PATCH', `${base}/${id}`, { token: owner.token, body: { url: 'https://other-hooks.invalid/hook' } });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.data.warnings).toEqual([unresolved('url', 'other-hooks.invalid')]);
    const events = await app.request('PATCH', `${base}/${id}`, { token: owner.token, body: { events: ['*'] } });
    expect(events.status).toBe(200);
    expect(events.body.data).not.toHaveProperty('warnings');

    const validate = await app.request('POST', `${base}/${id}/validate`, { token: owner.token, body: {} });
    expect(validate.status).toBe(200);
    expect(validate.body.valid).toBe(false);
    await app.request('DELETE', `${base}/${id}`, { token: owner.token });
  });

  it('private literals and names resolving to private addresses are still refused with 400 naming the field', async () => {
    const hook = await app.request('POST', base, { token: owner.token, body: { url: 'https://8.8.8.8/hook', events: ['webhook.test'] } });
    expect(hook.status, hook.text).toBe(201);
    expect(hook.body.data).not.toHaveProperty('warnings');
    for (const url of ['https://localhost/hook', 'https://10.1.2.3/hook', 'https://[::1]/hook', 'https://169.254.169.254/hook']) {
      const created = await app.request('POST', base, { token: owner.token, body: { url } });
      expect(created.status, `${url}: ${created.text}`).toBe(400);
      expect(created.body.error.details).toMatch(/^url: /);
      const updated = await app.request('PATCH', `${base}/${hook.body.data.webhook.id}`, { token: owner.token, body: { url } });
      expect(updated.status, `${url}: ${updated.text}`).toBe(400);
      expect(updated.body.error.details).toMatch(/^url: /);
    }
    // The form rules are unchanged: an unresolvable name over plain http is still refused for its scheme.
    const plain = await app.request('POST', base, { token: owner.token, body: { url: 'http://hooks-not-yet-live.invalid/hook' } });
    expect(plain.status).toBe(400);
    expect(plain.body.error.details).toBe('url: must use https');
  });
});

describe('knowledge-base provider baseUrl', () => {
  const configs = '/api/v1/knowledge-base/configs';

  it('names that do not resolve are saved with one warning per field, on create and update', async () => {
    const created = await app.request('POST', configs, {
      token: owner.token,
      body: {
        name: 'Remote providers',
        embedding: { provider: 'openai', baseUrl: 'https://embed-not-yet-live.invalid/v1', model: 'embed-x' },
        llm: { provider: 'openai', baseUrl: 'https://llm-not-yet-live.invalid/v1', model: 'chat-x' },
      },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.warnings).toEqual([
      unresolved('embedding.baseUrl', 'embed-not-yet-live.invalid'),
      unresolved('llm.baseUrl', 'llm-not-yet-live.invalid'),
    ]);
    const id = created.body.data.config.id as string;

    const updated = await app.request('PATCH', `${configs}/${id}`, {
      token: owner.token,
      body: { llm: { provider: 'openai', baseUrl: 'https://llm-moved.invalid', model: 'chat-x' } },
    });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.data.warnings).toEqual([unresolved('llm.baseUrl', 'llm-moved.invalid')]);
    const plain = await app.request('PATCH', `${configs}/${id}`, { token: owner.token, body: { temperature: 0.5 } });
    expect(plain.status).toBe(200);
    expect(plain.body.data).not.toHaveProperty('warnings');
  });

  it('private literals and names resolving to private addresses are still refused with 400 naming the field', async () => {
    const local = await app.request('POST', configs, { token: owner.token, body: { name: 'Local' } });
    expect(local.status).toBe(201);
    expect(local.body.data).not.toHaveProperty('warnings');
    for (const baseUrl of ['http://localhost:11434', 'http://192.168.1.10:8000', 'http://[::1]:11434', 'http://169.254.169.254']) {
      const llm = await app.request('POST', configs, { token: owner.token, body: { name: 'Private', llm: { provider: 'openai', baseUrl, model: 'm' } } });
      expect(llm.status, `${baseUrl}: ${llm.text}`).toBe(400);
      expect(llm.body.error.details).toMatch(/^llm\.baseUrl: /);
      const embedding = await app.request('PATCH', `${configs}/${local.body.data.config.id}`, {
        token: owner.token,
        body: { embedding: { provider: 'openai', baseUrl, model: 'e' } },
      });
      expect(embedding.status, `${baseUrl}: ${embedding.text}`).toBe(400);
      expect(embedding.body.error.details).toMatch(/^embedding\.baseUrl: /);
    }
  });
});

it('the OpenAPI document shows the optional warnings of every save response that has them', async () => {
  const doc = (await app.request('GET', '/api/v1/openapi.json')).body;
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (node === null || typeof node !== 'object') return node;
    const ref = (node as { $ref?: string }).$ref;
    if (ref)
      return resolve(
        ref
          .slice(2)
          .split('/')
          .reduce((at: any, part) => at[part], doc),
      );
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolve(v)]));
  };
  for (const [path, method, status] of [
    ['/api/v1/chat-interfaces', 'post', '201'],
    ['/api/v1/chat-interfaces/{id}', 'patch', '200'],
    ['/api/v1/enterprise/webhooks', 'post', '201'],
    ['/api/v1/enterprise/webhooks/{webhookId}', 'patch', '200'],
    ['/api/v1/knowledge-base/configs', 'post', '201'],
    ['/api/v1/knowledge-base/configs/{id}', 'patch', '200'],
  ] as const) {
    const response = resolve(doc.paths[path][method].responses[status]);
    const data = (response as any).content['application/json'].schema.properties.data;
    expect(data.properties.warnings, `${method} ${path}`).toMatchObject({ type: 'array', items: { type: 'string' } });
    expect(data.required ?? []).not.toContain('warnings');
  }
});
