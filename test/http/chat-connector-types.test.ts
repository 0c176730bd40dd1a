import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startProviderMock, type ProviderMock } from '../helpers/provider-mock-servers.ts';

let app: TestApp;
let mock: ProviderMock;
let owner: { token: string };

const TYPES = [
  { type: 'flow', path: '/api/v1/run/flow-123', route: 'langflow' },
  { type: 'openai', path: '/v1/chat/completions', route: 'openai' },
  { type: 'messages', path: '/v1/messages', route: 'anthropic' },
  { type: 'generation', path: '/v1beta/models/gemini-2.5-flash:generateContent', route: 'gemini' },
  { type: 'generic', path: '/generic', route: 'generic' },
] as const;

async function interfaceFor(path: string, endpointType: string) {
  const ci = await app.request('POST', '/api/v1/chat-interfaces', {
    token: owner.token,
    body: { name: `t-${endpointType}`, endpointUrl: `${mock.url}${path}`, apiKey: 'sk-upstream', endpointType },
  });
  expect(ci.status, ci.text).toBe(201);
  const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'k', chatInterfaceId: ci.body.data.chatInterface.id } });
  return { slug: ci.body.data.chatInterface.slug as string, key: key.body.data.key as string };
}

beforeAll(async () => {
  mock = await startProviderMock();
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${mock.port}`, OUTBOUND_TIMEOUT_MS: '1000', RATE_LIMIT_CHAT: '1000' });
  owner = await app.signUp('types');
});
afterAll(async () => {
  await app?.stop();
  await mock?.close();
});

describe.each(TYPES)('chat through a $type endpoint', ({ type, path, route }) => {
  it("answers, with history on the next turn, and streams the upstream's own stream", async () => {
    mock.reset();
    const iface = await interfaceFor(path, type);
    const first = await app.request('POST', `/api/v1/chat/${iface.slug}`, { token: iface.key, body: { message: 'first question' } });
    expect(first.status, first.text).toBe(200);
    expect(first.body.message).toBe('Echo: first question');
    const sent = mock.requests.find((r) => r.route === route)!;
    expect(sent.headers['content-type']).toContain('application/json');
    if (type !== 'generation') expect(sent.headers.authorization).toBe('Bearer sk-upstream');
    if (type === 'flow')
      expect(sent.body).toMatchObject({ input_value: 'first question', output_type: 'chat', input_type: 'chat', session_id: first.body.sessionId });
    if (type === 'generic') expect(sent.body).toEqual({ message: 'first question', session_id: first.body.sessionId });

    await app.request('POST', `/api/v1/chat/${iface.slug}`, { token: iface.key, body: { message: 'second question', sessionId: first.body.sessionId } });
    const second = mock.requests.filter((r) => r.route === route).at(-1)!;
    if (type === 'openai' || type === 'messages') expect(JSON.stringify(second.body.messages)).toContain('first question');
    if (type === 'generation') expect(JSON.stringify(second.body.contents)).toContain('first question');

    const streamed = await app.request('POST', `/api/v1/chat/${iface.slug}`, {
      token: iface.key,
      body: { message: 'stream please' },
      headers: { accept: 'text/event-stream' },
    });
    expect(streamed.headers['content-type']).toContain('text/event-stream');
    const events = streamed.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6));
    expect(events.at(-1)).toBe('[DONE]');
    const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
    const complete = parsed.find((e) => e.type === 'complete');
    expect(complete.message).toBe('Echo: stream please');
    expect(
      parsed
        .filter((e) => e.type === 'delta')
        .map((e) => e.text)
        .join(''),
    ).toBe('Echo: stream please');
  });
});

describe('failure modes through the chat endpoint', () => {
  it.each([
    ['non-json', 502, 'UPSTREAM_INVALID_RESPONSE'],
    ['wrong-shape', 502, 'UPSTREAM_INVALID_RESPONSE'],
    ['401', 502, 'UPSTREAM_ERROR'],
    ['429', 502, 'UPSTREAM_ERROR'],
    ['500', 502, 'UPSTREAM_ERROR'],
    ['redirect-private', 502, 'UPSTREAM_ERROR'],
    ['slow', 504, 'UPSTREAM_TIMEOUT'],
  ] as const)('%s -> %i %s, and the key never leaks', async (mode, status, code) => {
    const iface = await interfaceFor('/v1/chat/completions', 'openai');
    mock.reset();
    mock.setMode(mode, { delayMs: 3000 });
    const res = await app.request('POST', `/api/v1/chat/${iface.slug}`, { token: iface.key, body: { message: 'hi' } });
    mock.setMode('normal');
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(code);
    expect(res.text).not.toContain('sk-upstream');
    if (mode === 'redirect-private') expect(mock.requests.some((r) => r.route === 'redirect-target')).toBe(false);
  });

  it('connection refused explains that local addresses must be exposed through a tunnel', async () => {
    const closed = await startTestApp({ OUTBOUND_ALLOW_HOSTS: '127.0.0.1:9' });
    try {
      const o = await closed.signUp('refused');
      const ci = await closed.request('POST', '/api/v1/chat-interfaces', { token: o.token, body: { name: 'x', endpointUrl: 'http://127.0.0.1:9/generic' } });
      const key = (await closed.request('POST', '/api/v1/api-keys', { token: o.token, body: { name: 'k', chatInterfaceId: ci.body.data.chatInterface.id } }))
        .body.data.key;
      const res = await closed.request('POST', `/api/v1/chat/${ci.body.data.chatInterface.slug}`, { token: key, body: { message: 'hi' } });
      expect(res.status).toBe(502);
      expect(res.body.error.code).toBe('UPSTREAM_CONNECTION_FAILED');
      expect(res.body.error.message).toMatch(/localhost|127\.0\.0\.1/);
      expect(res.body.error.message).toMatch(/tunnel/i);
    } finally {
      await closed.stop();
    }
  });

  it('an interface with neither knowledge base nor endpoint says it is not configured (503)', async () => {
    const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'empty' } });
    const key = (await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'k', chatInterfaceId: ci.body.data.chatInterface.id } }))
      .body.data.key;
    const res = await app.request('POST', `/api/v1/chat/${ci.body.data.chatInterface.slug}`, { token: key, body: { message: 'hi' } });
    expect(res.status).toBe(503);
    expect(res.body.error.message).toMatch(/not configured/);
  });
});

describe('the real default timeout', () => {
  it('gives up after 30 seconds', { timeout: 60_000 }, async () => {
    const real = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${mock.port}` });
    try {
      const o = await real.signUp('default-timeout');
      const ci = await real.request('POST', '/api/v1/chat-interfaces', { token: o.token, body: { name: 'slow', endpointUrl: `${mock.url}/generic` } });
      const key = (await real.request('POST', '/api/v1/api-keys', { token: o.token, body: { name: 'k', chatInterfaceId: ci.body.data.chatInterface.id } })).body
        .data.key;
      mock.setMode('slow', { delayMs: 40_000 });
      const started = Date.now();
      const res = await real.request('POST', `/api/v1/chat/${ci.body.data.chatInterface.slug}`, { token: key, body: { message: 'hi' } });
      const elapsed = Date.now() - started;
      expect(res.status).toBe(504);
      expect(res.body.error.message).toMatch(/30 seconds/);
      expect(elapsed).toBeGreaterThanOrEqual(29_500);
    } finally {
      mock.setMode('normal');
      await real.stop();
    }
  });
});
