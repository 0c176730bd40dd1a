import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * GET /api/v1/admin/rate-limits through the listener: the configured budgets, and the callers nearest their limits
 * with counts that follow the calls this test made (one of each caller kind), for admins only.
 */

const LIMITS = {
  RATE_LIMIT_DEFAULT: '12',
  RATE_LIMIT_CHAT: '7',
  RATE_LIMIT_KB_QUERY: '8',
  RATE_LIMIT_UPLOAD: '9',
  RATE_LIMIT_VISITOR_SESSIONS: '11',
  RATE_LIMIT_SUPPORT: '4',
  RATE_LIMIT_SUPPORT_GLOBAL: '2',
  RATE_LIMIT_VISITOR_IP: '50',
  RATE_LIMIT_WINDOW_SECONDS: '120',
};
const PATH = '/api/v1/admin/rate-limits';

interface Caller {
  bucket: string;
  operation: string | null;
  callerKind: string;
  callerId: string | null;
  count: number;
  limit: number;
  remaining: number;
  usedRatio: number;
  resetsAt: string;
}

let app: TestApp;
let admin: { token: string; ownerId: string };
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let apiKey: { key: string; id: string };
let visitorId: string;

beforeAll(async () => {
  app = await startTestApp(LIMITS);
  admin = await app.signUp('limits-admin');
  a = await app.signUp('limits-a');
  b = await app.signUp('limits-b');
  await app.deps.database.db.updateTable('owners').set({ role: 'admin' }).where('id', '=', admin.ownerId).execute();

  const iface = await app.request('POST', '/api/v1/chat-interfaces', {
    token: b.token,
    body: { name: 'Limits help', endpointUrl: 'https://example.com/bot', public: true },
  });
  expect(iface.status, iface.text).toBe(201);
  const key = await app.request('POST', '/api/v1/api-keys', { token: b.token, body: { name: 'limits', chatInterfaceId: iface.body.data.chatInterface.id } });
  expect(key.status, key.text).toBe(201);
  apiKey = { key: key.body.data.key, id: key.body.data.apiKey.id };

  const slug = iface.body.data.chatInterface.slug;
  const visitor = await app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} });
  expect(visitor.status, visitor.text).toBe(201);
  visitorId = visitor.body.data.visitorId;
  expect((await app.request('GET', `/api/v1/chat/${slug}/visitor-conversations`, { token: visitor.body.data.token })).status).toBe(200);

  // The hidden field filled in: counted against both support budgets, nothing stored or sent.
  const contact = await app.request('POST', '/api/v1/support/contact', {
    body: { name: 'Bot', email: 'bot@example.com', subject: 'Hi', message: 'Hello', website: 'https://spam.example' },
  });
  expect(contact.status, contact.text).toBe(202);
});
afterAll(async () => {
  await app?.stop();
});

describe('admin rate limits', () => {
  it('is for admins: 401 without a session, 403 for an owner and for an API key', async () => {
    expect((await app.request('GET', PATH)).status).toBe(401);
    expect((await app.request('GET', PATH, { token: b.token })).status).toBe(403);
    expect((await app.request('GET', PATH, { token: apiKey.key })).status).toBe(403);
  });

  it('lists every budget as configured and the callers nearest their limits, with exact counts', async () => {
    for (let i = 0; i < 12; i++) expect((await app.request('GET', '/api/v1/auth/me', { token: a.token })).status).toBe(200);
    // Refused, and a refusal is not counted.
    expect((await app.request('GET', '/api/v1/auth/me', { token: a.token })).status).toBe(429);

    const before = Date.now();
    const res = await app.request('GET', PATH, { token: admin.token });
    expect(res.status, res.text).toBe(200);
    const view = res.body.data;
    expect(view.store).toBe(process.env.REDIS_URL ? 'redis' : 'memory');
    expect(view.windowSeconds).toBe(120);
    expect(view.buckets).toEqual([
      { bucket: 'chat', appliesTo: 'perCallerPerOperation', limit: 7, setting: 'RATE_LIMIT_CHAT' },
      { bucket: 'kbQuery', appliesTo: 'perCallerPerOperation', limit: 8, setting: 'RATE_LIMIT_KB_QUERY' },
      { bucket: 'upload', appliesTo: 'perCallerPerOperation', limit: 9, setting: 'RATE_LIMIT_UPLOAD' },
      { bucket: 'visitorSession', appliesTo: 'perCallerPerOperation', limit: 11, setting: 'RATE_LIMIT_VISITOR_SESSIONS' },
      { bucket: 'support', appliesTo: 'perCallerPerOperation', limit: 4, setting: 'RATE_LIMIT_SUPPORT' },
      { bucket: 'default', appliesTo: 'perCallerPerOperation', limit: 12, setting: 'RATE_LIMIT_DEFAULT' },
      { bucket: 'visitorIp', appliesTo: 'perVisitorIp', limit: 50, setting: 'RATE_LIMIT_VISITOR_IP' },
      { bucket: 'support-contact', appliesTo: 'shared', limit: 2, setting: 'RATE_LIMIT_SUPPORT_GLOBAL' },
    ]);
    expect(view.truncated).toBe(false);

    const callers = view.callers as Caller[];
    expect(view.scanned).toBeGreaterThanOrEqual(callers.length);
    const [busiest, second] = callers;
    expect(busiest).toMatchObject({
      bucket: 'default',
      operation: 'auth.me',
      callerKind: 'owner',
      callerId: a.ownerId,
      count: 12,
      limit: 12,
      remaining: 0,
      usedRatio: 1,
    });
    // A slot frees when the first of the 12 calls, made just before, leaves the 120 s window.
    expect(Date.parse(busiest!.resetsAt)).toBeGreaterThan(before + 110_000);
    expect(Date.parse(busiest!.resetsAt)).toBeLessThanOrEqual(Date.now() + 120_000);
    expect(second).toMatchObject({
      bucket: 'support-contact',
      operation: null,
      callerKind: 'shared',
      callerId: null,
      count: 1,
      limit: 2,
      remaining: 1,
      usedRatio: 0.5,
    });
    for (let i = 1; i < callers.length; i++) expect(callers[i - 1]!.usedRatio).toBeGreaterThanOrEqual(callers[i]!.usedRatio);

    const find = (match: Partial<Caller>) => callers.find((c) => Object.entries(match).every(([k, v]) => c[k as keyof Caller] === v));
    expect(find({ bucket: 'default', operation: 'auth.signUp', callerKind: 'ip' })).toMatchObject({
      callerId: '127.0.0.1',
      count: 3,
      limit: 12,
      usedRatio: 0.25,
    });
    expect(find({ bucket: 'support', operation: 'support.contact', callerKind: 'ip' })).toMatchObject({
      callerId: '127.0.0.1',
      count: 1,
      limit: 4,
      remaining: 3,
    });
    expect(find({ bucket: 'visitorIp' })).toMatchObject({ operation: null, callerKind: 'ip', callerId: '127.0.0.1', count: 1, limit: 50, usedRatio: 0.02 });
    expect(find({ callerKind: 'visitor' })).toMatchObject({ bucket: 'default', operation: 'visitors.conversations', callerId: visitorId, count: 1 });
    expect(find({ callerKind: 'apiKey' })).toMatchObject({ bucket: 'default', operation: 'admin.rateLimits', callerId: apiKey.id, count: 1 });
    expect(find({ operation: 'admin.rateLimits', callerId: b.ownerId })).toMatchObject({ callerKind: 'owner', count: 1 });
    // The admin's own look is counted like any call.
    expect(find({ operation: 'admin.rateLimits', callerId: admin.ownerId })).toMatchObject({ callerKind: 'owner', count: 1, limit: 12, remaining: 11 });
  });

  it('honours top and the bucket filter', async () => {
    const top = await app.request('GET', `${PATH}?top=2`, { token: admin.token });
    expect(top.status, top.text).toBe(200);
    expect(top.body.data.callers.map((c: Caller) => [c.bucket, c.callerId])).toEqual([
      ['default', a.ownerId],
      ['support-contact', null],
    ]);

    const support = await app.request('GET', `${PATH}?bucket=support`, { token: admin.token });
    expect(support.status, support.text).toBe(200);
    expect(support.body.data.callers).toEqual([expect.objectContaining({ bucket: 'support', operation: 'support.contact', callerId: '127.0.0.1', count: 1 })]);
    expect(support.body.data.buckets).toHaveLength(8);

    const chat = await app.request('GET', `${PATH}?bucket=chat&top=1`, { token: admin.token });
    expect(chat.status, chat.text).toBe(200);
    expect(chat.body.data.callers).toEqual([]);
  });

  it.each(['top=0', 'top=201', 'top=1000', 'top=abc', 'top=1.5', 'bucket=nope', 'bucket=shared'])('refuses %s with 400', async (query) => {
    const res = await app.request('GET', `${PATH}?${query}`, { token: admin.token });
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_FAILED');
  });
});
