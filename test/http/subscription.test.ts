import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * GET /api/v1/user/subscription through the real listener: the plan and its limits, and this month's usage
 * counted by the chat turn and the knowledge-base query; another owner's usage stays at zero.
 */

let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let adminToken: string;
let configId: string;
let chatKey: string;
let chatSlug: string;

const subscription = async (token: string) => {
  const res = await app.request('GET', '/api/v1/user/subscription', { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.subscription;
};

beforeAll(async () => {
  app = await startTestApp({ ADMIN_EMAILS: 'billing-admin@example.com' });
  a = await app.signUp('sub-a');
  b = await app.signUp('sub-b');
  const admin = await app.request('POST', '/api/v1/auth/sign-up', { body: { email: 'billing-admin@example.com', password: 'long enough pw' } });
  adminToken = admin.body.data.token;
  configId = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Returns' } })).body.data.config.id;
  const text = 'Returns are accepted within 30 days of delivery. Refunds reach your card in 5 business days.';
  await app.upload('/api/v1/knowledge-base/documents', { token: a.token, fileName: 'returns.txt', bytes: Buffer.from(text), fields: { configId } });
  for (let i = 0; i < 100; i++) {
    const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token: a.token });
    if (docs.body.data.documents.every((d: { status: string }) => d.status === 'completed')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'Returns chat', configId } });
  chatSlug = ci.body.data.chatInterface.slug;
  chatKey = (await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name: 'site', chatInterfaceId: ci.body.data.chatInterface.id } })).body
    .data.key;
});
afterAll(async () => {
  await app?.stop();
});

describe('GET /api/v1/user/subscription', () => {
  it('shows the plan, its limits, the calendar-month period and zero usage before any use', async () => {
    const sub = await subscription(b.token);
    const now = new Date();
    const periodStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
    expect(sub).toMatchObject({
      plan: 'free',
      status: 'active',
      billingConfigured: false,
      currentPeriodStart: periodStart,
      cancelAtPeriodEnd: false,
      trialEnd: null,
      limits: { uploadBytes: 10 * 1024 * 1024, enterpriseWebhooks: false },
      usage: { periodStart, messages: 0, queries: 0, tokensIn: 0, tokensOut: 0, documents: 0, storageBytes: 0 },
    });
    expect(Date.parse(sub.currentPeriodEnd)).toBeGreaterThan(now.getTime());
  });

  it('counts answered chat messages, queries, their tokens and the stored documents, for the owner only', async () => {
    const before = await subscription(a.token);
    expect(before.usage).toMatchObject({ messages: 0, queries: 0, documents: 1 });
    expect(before.usage.storageBytes).toBeGreaterThan(80);

    for (let i = 0; i < 2; i++) {
      const res = await app.request('POST', `/api/v1/chat/${chatSlug}`, { token: chatKey, body: { message: 'How long do I have to return an item?' } });
      expect(res.status, res.text).toBe(200);
    }
    const query = await app.request('POST', '/api/v1/knowledge-base/query', { token: a.token, body: { configId, query: 'When do refunds arrive?' } });
    expect(query.status, query.text).toBe(200);

    const after = await subscription(a.token);
    expect(after.usage).toMatchObject({ messages: 2, queries: 1 });
    expect(after.usage.tokensIn).toBeGreaterThan(0);
    expect(after.usage.tokensOut).toBeGreaterThan(0);
    expect((await subscription(b.token)).usage).toMatchObject({ messages: 0, queries: 0, tokensIn: 0, documents: 0 });

    const graphql = await app.request('POST', '/graphql', {
      token: a.token,
      body: { query: '{ me { plan subscription { plan status source uploadLimitBytes usage { messages queries tokensIn documents } } } }' },
    });
    expect(graphql.status, graphql.text).toBe(200);
    expect(graphql.body.data.me.subscription).toEqual({
      plan: 'free',
      status: 'active',
      source: 'admin',
      uploadLimitBytes: 10 * 1024 * 1024,
      usage: { messages: 2, queries: 1, tokensIn: after.usage.tokensIn, documents: 1 },
    });
  });

  it('follows a plan an admin sets, with that plan’s limits', async () => {
    const changed = await app.request('PATCH', `/api/v1/admin/owners/${b.ownerId}`, { token: adminToken, body: { plan: 'enterprise' } });
    expect(changed.status, changed.text).toBe(200);
    expect(await subscription(b.token)).toMatchObject({ plan: 'enterprise', limits: { uploadBytes: 100 * 1024 * 1024, enterpriseWebhooks: true } });
  });

  it('is 401 without a credential and 403 for an API key (not an owner session)', async () => {
    expect((await app.request('GET', '/api/v1/user/subscription')).status).toBe(401);
    expect((await app.request('GET', '/api/v1/user/subscription', { token: chatKey })).status).toBe(403);
  });
});
