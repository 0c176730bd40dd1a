import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { sseEvents as sse } from '../helpers/sse.ts';

let app: TestApp;
let upstream: Server;
let upstreamPort: number;
let mode: 'ok' | 'non-json' | 'no-text' | 'slow' | '401' = 'ok';
const upstreamRequests: Array<{ headers: Record<string, unknown>; body: any }> = [];

// owners A and B; A has interfaces kbChat (knowledge base) and apiChat (external endpoint)
let a: { token: string };
let b: { token: string };
let kbChat: { id: string; slug: string; key: string };
let apiChat: { id: string; slug: string; key: string };
let bChat: { id: string; slug: string; key: string };

async function makeInterface(token: string, body: Record<string, unknown>) {
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token, body });
  expect(ci.status, ci.text).toBe(201);
  const key = await app.request('POST', '/api/v1/api-keys', { token, body: { name: 'widget', chatInterfaceId: ci.body.data.chatInterface.id } });
  return { id: ci.body.data.chatInterface.id as string, slug: ci.body.data.chatInterface.slug as string, key: key.body.data.key as string };
}

const chat = (iface: { slug: string }, key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  app.request('POST', `/api/v1/chat/${iface.slug}`, { token: key, body, headers });

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}');
      upstreamRequests.push({ headers: req.headers, body });
      if (mode === 'slow') return void setTimeout(() => res.end('{}'), 3000);
      if (mode === '401') return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"bad key"}');
      if (mode === 'non-json') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>oops</html>');
      if (mode === 'no-text') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"unexpected":true}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ response: `Upstream says: ${body.message} <b>bold</b>` }));
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${upstreamPort}`, OUTBOUND_TIMEOUT_MS: '800', RATE_LIMIT_UPLOAD: '100' });
  a = await app.signUp('chat-a');
  b = await app.signUp('chat-b');
  const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Support KB', memory: { maxMessages: 2 } } })).body
    .data.config.id;
  await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, { token: a.token, body: { tools: [{ name: 'lead_capture', enabled: true }] } });
  await app.upload('/api/v1/knowledge-base/documents', {
    token: a.token,
    fileName: 'returns.txt',
    bytes: Buffer.from('Returns are accepted within 30 days of delivery. Refunds reach your card in 5 business days.'),
    fields: { configId: kb },
  });
  for (let i = 0; i < 100; i++) {
    const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${kb}`, { token: a.token });
    if (docs.body.data.documents.every((d: { status: string }) => d.status === 'completed')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  kbChat = await makeInterface(a.token, { name: 'KB chat', configId: kb });
  apiChat = await makeInterface(a.token, { name: 'API chat', endpointUrl: `http://127.0.0.1:${upstreamPort}/bot`, apiKey: 'upstream-key-123' });
  bChat = await makeInterface(b.token, { name: 'B chat', endpointUrl: `http://127.0.0.1:${upstreamPort}/bot` });
});
afterAll(async () => {
  await app?.stop();
  upstream?.close();
});

describe('POST /api/v1/chat/{slug}', () => {
  it('a knowledge-base interface answers with sources, usage and a generated session id (flat response)', async () => {
    const res = await chat(kbChat, kbChat.key, { message: 'How many days do I have to return an item?' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ success: true, toolCalls: [], formConfig: {} });
    expect(res.body.data).toBeUndefined();
    expect(res.body.message).toContain('30 days');
    expect(res.body.sources[0].metadata.fileName).toBe('returns.txt');
    expect(res.body.usage.totalTokens).toBeGreaterThan(0);
    expect(res.body.sessionId).toMatch(/^api_\d{13}_[0-9a-f]+$/);
  });

  it('continues a session, keeps the history, and shows it to the owner and the key', async () => {
    const first = await chat(kbChat, kbChat.key, { message: 'When do refunds arrive?' });
    const sessionId = first.body.sessionId;
    const second = await chat(kbChat, kbChat.key, { message: 'And returns?', sessionId });
    expect(second.body.sessionId).toBe(sessionId);
    const asKey = await app.request('GET', `/api/v1/chat-messages/history?sessionId=${sessionId}`, { token: kbChat.key });
    expect(asKey.status).toBe(200);
    expect(asKey.body.data.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(asKey.body.data.messages[0].content).toBe('When do refunds arrive?');
    const asOwner = await app.request('GET', `/api/v1/chat-messages/history?sessionId=${sessionId}`, { token: a.token });
    expect(asOwner.body.data.count).toBe(4);

    const operator = await app.request('POST', '/api/v1/chat-messages', { token: a.token, body: { sessionId, message: 'Hi, this is Anna from support.' } });
    expect(operator.status).toBe(201);
    expect(operator.body.data.message).toMatchObject({ role: 'operator', content: 'Hi, this is Anna from support.' });
    const after = await app.request('GET', `/api/v1/chat-messages/history?sessionId=${sessionId}`, { token: a.token });
    expect(after.body.data.messages.at(-1).role).toBe('operator');
    // The whole chat-and-messaging group has the chat limit (60), not the default one (100).
    expect([operator.headers['x-ratelimit-limit'], after.headers['x-ratelimit-limit']]).toEqual(['60', '60']);
  });

  it('isolates sessions across interfaces and owners', async () => {
    const first = await chat(kbChat, kbChat.key, { message: 'refunds' });
    const sessionId = first.body.sessionId;
    // another interface's key cannot read it, nor continue it through its own interface
    expect((await app.request('GET', `/api/v1/chat-messages/history?sessionId=${sessionId}`, { token: apiChat.key })).status).toBe(404);
    expect((await chat(apiChat, apiChat.key, { message: 'hi', sessionId })).status).toBe(404);
    // another owner sees nothing
    expect((await app.request('GET', `/api/v1/chat-messages/history?sessionId=${sessionId}`, { token: b.token })).status).toBe(404);
    expect((await app.request('POST', '/api/v1/chat-messages', { token: b.token, body: { sessionId, message: 'x' } })).status).toBe(404);
    expect((await app.request('GET', '/api/v1/chat-messages/history?sessionId=api_0_unknown', { token: a.token })).status).toBe(404);
    expect((await chat(kbChat, kbChat.key, { message: 'hi', sessionId: 'api_123_madeup' })).status).toBe(404);
  });

  it("checks the key and the input: 401 without or with a bad key, 403 for a key of the owner's other interface, 404 for another owner's, 400 for bad messages", async () => {
    expect((await app.request('POST', `/api/v1/chat/${kbChat.slug}`, { body: { message: 'hi' } })).status).toBe(401);
    expect((await chat(kbChat, 'svc_' + 'a'.repeat(38), { message: 'hi' })).status).toBe(401);
    const wrong = await chat(kbChat, apiChat.key, { message: 'hi' });
    expect(wrong.status).toBe(403);
    expect(wrong.body.error.message).toBe('This API key belongs to another chat interface');
    expect((await chat(kbChat, a.token, { message: 'hi' })).status).toBe(403);
    const unknown = await chat({ slug: 'no-such-interface' }, kbChat.key, { message: 'hi' });
    expect(unknown.status).toBe(404);
    // Another owner's interface is as unknown as a missing one: a key must not tell which slugs exist.
    const foreign = await chat(bChat, kbChat.key, { message: 'hi' });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toEqual(unknown.body.error);
    for (const body of [{}, { message: '' }, { message: '   ' }, { message: 'x'.repeat(4001) }, { message: 'hi', sessionId: 'bad id!' }]) {
      const res = await chat(kbChat, kbChat.key, body);
      expect(res.status, JSON.stringify(body).slice(0, 50)).toBe(400);
    }
  });

  it('lead capture shows in toolCalls and fills formConfig', async () => {
    const res = await chat(kbChat, kbChat.key, { message: 'Can someone from sales contact me?' });
    expect(res.body.toolCalls).toEqual([{ name: 'lead_capture', arguments: expect.any(Object) }]);
    expect(res.body.formConfig).toMatchObject({
      tool: 'lead_capture',
      fields: expect.arrayContaining([expect.objectContaining({ name: 'email', type: 'email' })]),
    });
  });

  it('streams with Accept: text/event-stream: deltas, a complete event with the full response, [DONE]', async () => {
    const res = await chat(kbChat, kbChat.key, { message: 'refund timing' }, { accept: 'text/event-stream' });
    expect(res.headers['content-type']).toContain('text/event-stream');
    const events = sse(res);
    expect(events.at(-1)).toBe('[DONE]');
    const complete = events.find((e) => e !== '[DONE]' && e.type === 'complete');
    expect(complete).toMatchObject({ success: true, sessionId: expect.stringMatching(/^api_/), toolCalls: [] });
    expect(
      events
        .filter((e) => e !== '[DONE]' && e.type === 'delta')
        .map((e) => e.text)
        .join(''),
    ).toBe(complete.message);
  });

  it('an external endpoint answers (generic type: x-api-key, message + session_id), its reply kept as plain text', async () => {
    mode = 'ok';
    const res = await chat(apiChat, apiChat.key, { message: 'Hello upstream' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.message).toBe('Upstream says: Hello upstream <b>bold</b>');
    const sent = upstreamRequests.at(-1)!;
    expect(sent.headers['x-api-key']).toBe('upstream-key-123');
    expect(sent.headers['content-type']).toContain('application/json');
    expect(sent.body).toEqual({ message: 'Hello upstream', session_id: res.body.sessionId });
  });

  it('reports upstream failures with the clear messages and documented statuses', async () => {
    mode = 'non-json';
    const bad = await chat(apiChat, apiChat.key, { message: 'hi' });
    expect(bad.status).toBe(502);
    expect(bad.body.error.code).toBe('UPSTREAM_INVALID_RESPONSE');
    expect(bad.body.error.message).toMatch(/invalid response format/i);
    mode = 'no-text';
    expect((await chat(apiChat, apiChat.key, { message: 'hi' })).body.error.code).toBe('UPSTREAM_INVALID_RESPONSE');
    mode = 'slow';
    const slow = await chat(apiChat, apiChat.key, { message: 'hi' });
    expect(slow.status).toBe(504);
    expect(slow.body.error.code).toBe('UPSTREAM_TIMEOUT');
    mode = '401';
    const auth = await chat(apiChat, apiChat.key, { message: 'hi' });
    expect(auth.status).toBe(502);
    expect(auth.body.error.code).toBe('UPSTREAM_ERROR');
    mode = 'ok';
  });

  it('test-connection reports the detected type, auth, format, the reply and latency; other owners get 404', async () => {
    mode = 'ok';
    const saved = await app.request('POST', `/api/v1/chat-interfaces/${apiChat.id}/test-connection`, { token: a.token });
    expect(saved.status).toBe(200);
    expect(saved.body.data).toMatchObject({
      ok: true,
      detectedType: 'generic',
      typeSource: 'detected',
      authAccepted: true,
      formatRecognized: true,
      error: null,
    });
    expect(saved.body.data.reply).toContain('Upstream says');
    expect(saved.body.data.latencyMs).toBeGreaterThanOrEqual(0);
    mode = '401';
    const refused = await app.request('POST', `/api/v1/chat-interfaces/${apiChat.id}/test-connection`, { token: a.token, body: { apiKey: 'wrong' } });
    expect(refused.body.data).toMatchObject({ ok: false, authAccepted: false, status: 401 });
    mode = 'ok';
    const local = await app.request('POST', `/api/v1/chat-interfaces/${apiChat.id}/test-connection`, {
      token: a.token,
      body: { endpointUrl: 'http://localhost:3000/api/chat' },
    });
    expect(local.body.data.ok).toBe(false);
    expect(local.body.data.error.message).toMatch(/tunnel/i);
    expect((await app.request('POST', `/api/v1/chat-interfaces/${apiChat.id}/test-connection`, { token: b.token })).status).toBe(404);
  });
});
