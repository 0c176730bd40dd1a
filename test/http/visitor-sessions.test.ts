import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { sseEvents as sse } from '../helpers/sse.ts';

/**
 * Visitors of public chat interfaces, through the real listener: visitor tokens without a secret, the chat,
 * history and conversations they may reach, and everything they may not (other interfaces, other visitors,
 * owner and API-key routes, private interfaces, expired or altered tokens), with the per-visitor and per-IP limits.
 */

let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let shop: { id: string; slug: string };
let other: { id: string; slug: string };
let privateChat: { id: string; slug: string };
let bChat: { id: string; slug: string };
let apiKey: string;

async function makeInterface(token: string, body: Record<string, unknown>) {
  const res = await app.request('POST', '/api/v1/chat-interfaces', { token, body });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.chatInterface.id as string, slug: res.body.data.chatInterface.slug as string };
}

const startVisitor = (slug: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body, headers });

async function visitor(slug: string) {
  const res = await startVisitor(slug);
  expect(res.status, res.text).toBe(201);
  return res.body.data as { token: string; resumeToken: string; visitorId: string };
}

const say = (slug: string, token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  app.request('POST', `/api/v1/chat/${slug}/visitor-messages`, { token, body, headers });

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_UPLOAD: '100' });
  a = await app.signUp('visitors-a');
  b = await app.signUp('visitors-b');
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Shop help' } });
  const configId = kb.body.data.config.id;
  const uploaded = await app.upload('/api/v1/knowledge-base/documents', {
    token: a.token,
    fileName: 'returns.txt',
    bytes: Buffer.from('Returns are accepted within 30 days of delivery. Refunds reach your card in 5 business days.'),
    fields: { configId },
  });
  expect(uploaded.status).toBe(201);
  for (let i = 0; i < 200; i++) {
    const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token: a.token });
    if (docs.body.data.documents.every((d: { status: string }) => d.status === 'completed')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  shop = await makeInterface(a.token, {
    name: 'Shop help',
    configId,
    public: true,
    allowedOrigins: ['https://shop.example.com', 'https://*.example.org'],
    welcomeMessage: 'Welcome!',
    primaryColor: '#123456',
  });
  other = await makeInterface(a.token, { name: 'Other help', configId, public: true });
  privateChat = await makeInterface(a.token, { name: 'Private help', configId });
  bChat = await makeInterface(b.token, { name: 'B help', configId: null, public: true });
  const key = await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name: 'integration', chatInterfaceId: shop.id } });
  apiKey = key.body.data.key;
}, 60_000);
afterAll(() => app?.stop());

describe('POST /api/v1/chat/{slug}/visitor-sessions', () => {
  it('gives a new visitor a token, a resume token shown once and the interface as visitors see it', async () => {
    const res = await startVisitor(shop.slug);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      token: expect.stringMatching(/^vis_/),
      resumeToken: expect.stringMatching(/^vrt_/),
      visitorId: expect.any(String),
      interface: { slug: shop.slug, name: 'Shop help', welcomeMessage: 'Welcome!', primaryColor: '#123456', avatarUrl: null, placeholder: null },
    });
    expect(Date.parse(res.body.data.expiresAt) - Date.now()).toBeGreaterThan(3_500_000);
    expect(res.text).not.toContain('allowedOrigins');
    expect(res.headers['x-ratelimit-limit']).toBe('20');
  });

  it('resumes the same visitor with its resume token (200, no new resume token); a foreign or made-up one starts a new visitor', async () => {
    const first = await visitor(shop.slug);
    const again = await startVisitor(shop.slug, { resumeToken: first.resumeToken });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ visitorId: first.visitorId, resumeToken: null });
    expect(again.body.data.token).toMatch(/^vis_/);

    const elsewhere = await startVisitor(other.slug, { resumeToken: first.resumeToken });
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body.data.visitorId).not.toBe(first.visitorId);
    const madeUp = await startVisitor(shop.slug, { resumeToken: 'vrt_made-up' });
    expect(madeUp.status).toBe(201);
    expect(madeUp.body.data.visitorId).not.toBe(first.visitorId);
  });

  it('is 404 for an unknown or private interface, and 400 for a resume token that is not a string', async () => {
    expect((await startVisitor('no-such-chat')).status).toBe(404);
    expect((await startVisitor(privateChat.slug)).status).toBe(404);
    const bad = await startVisitor(shop.slug, { resumeToken: 42 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toContain('resumeToken');
  });

  it('refuses a page on a site the owner did not allow (403); allowed origins, wildcards and our own host pass', async () => {
    expect((await startVisitor(shop.slug, {}, { origin: 'https://evil.example.net' })).status).toBe(403);
    expect((await startVisitor(shop.slug, {}, { origin: 'https://example.org' })).status).toBe(403);
    expect((await startVisitor(shop.slug, {}, { origin: 'https://shop.example.com' })).status).toBe(201);
    expect((await startVisitor(shop.slug, {}, { origin: 'https://www.example.org' })).status).toBe(201);
    expect((await startVisitor(shop.slug, {}, { origin: new URL(app.url).origin })).status).toBe(201);
  });
});

describe('visitor chat, history and conversations', () => {
  it('chats with a visitor token (JSON and SSE), continues its own session and lists its conversations', async () => {
    const v = await visitor(shop.slug);
    const first = await say(shop.slug, v.token, { message: 'How long do I have to return an item?' });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ success: true, sessionId: expect.stringMatching(/^api_/) });
    expect(first.body.sources[0].metadata.fileName).toBe('returns.txt');

    const streamed = await say(shop.slug, v.token, { message: 'And the refund?', sessionId: first.body.sessionId }, { accept: 'text/event-stream' });
    expect(streamed.status).toBe(200);
    const events = sse(streamed);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.find((e) => e.type === 'complete')).toMatchObject({ sessionId: first.body.sessionId });

    const history = await app.request('GET', `/api/v1/chat/${shop.slug}/visitor-history?sessionId=${first.body.sessionId}`, { token: v.token });
    expect(history.status).toBe(200);
    expect(history.body.data.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);

    const list = await app.request('GET', `/api/v1/chat/${shop.slug}/visitor-conversations`, { token: v.token });
    expect(list.body.data.conversations).toHaveLength(1);
    expect(list.body.data.conversations[0]).toMatchObject({ sessionId: first.body.sessionId, preview: expect.any(String) });

    // The owner sees the visitor's conversation; the other owner does not.
    expect((await app.request('GET', `/api/v1/chat-messages/history?sessionId=${first.body.sessionId}`, { token: a.token })).status).toBe(200);
    expect((await app.request('GET', `/api/v1/chat-messages/history?sessionId=${first.body.sessionId}`, { token: b.token })).status).toBe(404);
  });

  it("another visitor's session, an API-key session and another interface's session are 404 to a visitor", async () => {
    const one = await visitor(shop.slug);
    const two = await visitor(shop.slug);
    const mine = await say(shop.slug, one.token, { message: 'What about returns?' });
    const theirs = (path: string) => app.request('GET', path, { token: two.token });
    expect((await theirs(`/api/v1/chat/${shop.slug}/visitor-history?sessionId=${mine.body.sessionId}`)).status).toBe(404);
    expect((await say(shop.slug, two.token, { message: 'hi', sessionId: mine.body.sessionId })).status).toBe(404);
    expect((await app.request('GET', `/api/v1/chat/${shop.slug}/visitor-conversations`, { token: two.token })).body.data.conversations).toEqual([]);

    const integration = await app.request('POST', `/api/v1/chat/${shop.slug}`, { token: apiKey, body: { message: 'Returns?' } });
    expect(integration.status).toBe(200);
    expect((await say(shop.slug, one.token, { message: 'hi', sessionId: integration.body.sessionId })).status).toBe(404);
  });

  it("a token for another interface is 403; another owner's interface too; an unknown slug 404", async () => {
    const v = await visitor(other.slug);
    expect((await say(shop.slug, v.token, { message: 'hi' })).status).toBe(403);
    expect((await app.request('GET', `/api/v1/chat/${shop.slug}/visitor-conversations`, { token: v.token })).status).toBe(403);
    expect((await say(bChat.slug, v.token, { message: 'hi' })).status).toBe(403);
    expect((await say('no-such-chat', v.token, { message: 'hi' })).status).toBe(404);
  });

  it('an interface made private stops its visitors at once (404), and public again lets them back', async () => {
    const v = await visitor(other.slug);
    expect((await app.request('PATCH', `/api/v1/chat-interfaces/${other.id}`, { token: a.token, body: { public: false } })).status).toBe(200);
    expect((await say(other.slug, v.token, { message: 'Returns?' })).status).toBe(404);
    expect((await app.request('GET', `/c/${other.slug}`)).status).toBe(404);
    expect((await app.request('PATCH', `/api/v1/chat-interfaces/${other.id}`, { token: a.token, body: { public: true } })).status).toBe(200);
    expect((await say(other.slug, v.token, { message: 'Returns?' })).status).toBe(200);
  });

  it('a visitor token opens nothing else: owner routes, the API-key chat and the integrators history are 403', async () => {
    const v = await visitor(shop.slug);
    expect((await app.request('GET', '/api/v1/api-keys', { token: v.token })).status).toBe(403);
    expect((await app.request('POST', `/api/v1/chat/${shop.slug}`, { token: v.token, body: { message: 'hi' } })).status).toBe(403);
    expect((await app.request('GET', '/api/v1/chat-messages/history?sessionId=api_1_x', { token: v.token })).status).toBe(403);
    expect((await app.request('GET', '/api/v1/leads', { token: v.token })).status).toBe(403);
  });

  it('an altered, truncated or missing token is 401', async () => {
    const v = await visitor(shop.slug);
    const [payload, tag] = v.token.slice(4).split('.');
    const flipped = `vis_${payload}.${tag!.startsWith('A') ? 'B' : 'A'}${tag!.slice(1)}`;
    expect((await say(shop.slug, flipped, { message: 'hi' })).status).toBe(401);
    expect((await say(shop.slug, v.token.slice(0, -3), { message: 'hi' })).status).toBe(401);
    // Another visitor id in the payload with the original tag.
    const forged = Buffer.from(
      Buffer.from(payload!, 'base64url')
        .toString()
        .replace(/^[0-9a-f]/, (c) => (c === 'a' ? 'b' : 'a')),
    ).toString('base64url');
    expect((await say(shop.slug, `vis_${forged}.${tag}`, { message: 'hi' })).status).toBe(401);
    expect((await app.request('POST', `/api/v1/chat/${shop.slug}/visitor-messages`, { body: { message: 'hi' } })).status).toBe(401);
  });
});

describe('visitor tokens expire; visitors are limited per visitor and per IP', () => {
  it('an expired token is 401 and the resume token brings the same visitor back', async () => {
    // Three seconds: the expiry is whole seconds, so a one-second token can lapse before a loaded machine uses it once.
    const short = await startTestApp({ VISITOR_TOKEN_TTL_SECONDS: '3' });
    try {
      const owner = await short.signUp('visitors-ttl');
      const created = await short.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Short lived', public: true } });
      const slug = created.body.data.chatInterface.slug;
      const started = await short.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} });
      const conversations = (token: string) => short.request('GET', `/api/v1/chat/${slug}/visitor-conversations`, { token });
      expect((await conversations(started.body.data.token)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 4_100));
      expect((await conversations(started.body.data.token)).status).toBe(401);
      const resumed = await short.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: { resumeToken: started.body.data.resumeToken } });
      expect(resumed.body.data.visitorId).toBe(started.body.data.visitorId);
      expect((await conversations(resumed.body.data.token)).status).toBe(200);
    } finally {
      await short.stop();
    }
  });

  it('per visitor (the chat bucket), per IP across visitors, and visitor tokens per IP, with Retry-After', async () => {
    const limited = await startTestApp({ RATE_LIMIT_CHAT: '2', RATE_LIMIT_VISITOR_IP: '5', RATE_LIMIT_VISITOR_SESSIONS: '3' });
    try {
      const owner = await limited.signUp('visitors-limits');
      const created = await limited.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Limited', public: true } });
      const slug = created.body.data.chatInterface.slug;
      const mint = () => limited.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} });
      const one = (await mint()).body.data.token;
      const two = (await mint()).body.data.token;
      const three = (await mint()).body.data.token;
      const refused = await mint();
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBeDefined();
      // A credential sent along (a visitor token is free to mint, an owner session) buys no budget of its own.
      for (const token of [one, owner.token]) {
        const withCredential = await limited.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { token, body: {} });
        expect(withCredential.status, withCredential.text).toBe(429);
      }

      // No backend: 503, but each call counts. Two per visitor, then 429 for that visitor only.
      const send = (token: string) => limited.request('POST', `/api/v1/chat/${slug}/visitor-messages`, { token, body: { message: 'hi' } });
      expect((await send(one)).status).toBe(503);
      expect((await send(one)).status).toBe(503);
      const perVisitor = await send(one);
      expect(perVisitor.status).toBe(429);
      expect(perVisitor.headers['x-ratelimit-limit']).toBe('2');
      expect((await send(two)).status).toBe(503);
      expect((await send(two)).status).toBe(503);
      // Five visitor calls from this IP in all, whichever visitors make them (a call its visitor's own limit
      // refused never reached the IP count).
      expect((await send(three)).status).toBe(503);
      const perIp = await send(three);
      expect(perIp.status).toBe(429);
      expect(perIp.headers['x-ratelimit-limit']).toBe('5');
    } finally {
      await limited.stop();
    }
  });
});

describe('allowedOrigins and public on chat interfaces', () => {
  it('normalises origins and refuses anything that is not one (it goes into a CSP header)', async () => {
    const ok = await app.request('PATCH', `/api/v1/chat-interfaces/${bChat.id}`, {
      token: b.token,
      body: { allowedOrigins: ['HTTPS://Shop.Example.com/', 'http://localhost:8080', 'https://*.example.org', 'https://shop.example.com'] },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.chatInterface.allowedOrigins).toEqual(['https://shop.example.com', 'http://localhost:8080', 'https://*.example.org']);
    for (const bad of ['https://example.com/path', 'javascript:alert(1)', "https://a.com; script-src 'unsafe-inline'", 'https://*', 'ftp://example.com', '*']) {
      const res = await app.request('PATCH', `/api/v1/chat-interfaces/${bChat.id}`, { token: b.token, body: { allowedOrigins: [bad] } });
      expect(res.status, bad).toBe(400);
      expect(res.body.error.details).toContain('allowedOrigins');
    }
    // Another owner's interface stays theirs.
    expect((await app.request('PATCH', `/api/v1/chat-interfaces/${bChat.id}`, { token: a.token, body: { public: false } })).status).toBe(404);
  });

  it('the hosted page carries the allowed origins as frame-ancestors; none allowed means none', async () => {
    const page = await app.request('GET', `/c/${shop.slug}?embed=1`);
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain('frame-ancestors https://shop.example.com https://*.example.org');
    expect(page.headers['x-frame-options']).toBeUndefined();
    expect(page.text).toContain(`data-slug="${shop.slug}"`);
    expect(page.text).not.toMatch(/<script>/);
    const none = await app.request('GET', `/c/${other.slug}`);
    expect(none.headers['content-security-policy']).toContain("frame-ancestors 'none'");

    const loader = await app.request('GET', '/widget.js', { headers: { 'accept-encoding': 'gzip' } });
    expect(loader.status).toBe(200);
    expect(loader.headers['content-type']).toContain('text/javascript');
    expect(loader.headers['cache-control']).toBe('public, max-age=300');
    expect(loader.headers['content-encoding']).toBe('gzip');
    expect((await app.request('GET', '/widget.js', { headers: { 'if-none-match': String(loader.headers.etag) } })).status).toBe(304);
    expect((await app.request('POST', '/widget.js')).status).toBe(405);
    expect((await app.request('GET', '/widget/assets/chat.0000000000000000.js')).status).toBe(404);
  });
});
