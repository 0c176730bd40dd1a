import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

// An upstream's reply is stored with the turn: text PostgreSQL refuses (NUL, lone surrogates) must not turn a
// visitor's answered question into a 500. Found by review.
let app: TestApp;
let upstream: Server;
let slug: string;
let key: string;
let ownerToken: string;
let streamingSlug: string;
let streamingKey: string;
let rawInterfaceId: string;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    if (req.url === '/v1/chat/completions') {
      // A streamed reply whose emoji's surrogate pair is split across two events, with a NUL and a lone surrogate.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const piece of ['Hi\\u0000 ', '\\ud83d', '\\ude00 and \\udc00', ' end\\ud83d'])
        res.write(`data: {"choices":[{"delta":{"content":"${piece}"}}]}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    // Written by hand: JSON.stringify would escape the same characters the same way; this is what a server sends.
    res.end('{"response":"Hello\\u0000 there \\ud800 and 😀"}');
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const port = (upstream.address() as AddressInfo).port;
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${port}` });
  const owner = await app.signUp('storable');
  ownerToken = owner.token;
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Raw', endpointUrl: `http://127.0.0.1:${port}/bot` } });
  slug = ci.body.data.chatInterface.slug;
  rawInterfaceId = ci.body.data.chatInterface.id;
  key = (await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'k', chatInterfaceId: ci.body.data.chatInterface.id } })).body.data
    .key;
  const streaming = await app.request('POST', '/api/v1/chat-interfaces', {
    token: owner.token,
    body: { name: 'Streaming', endpointUrl: `http://127.0.0.1:${port}/v1/chat/completions`, endpointType: 'openai' },
  });
  streamingSlug = streaming.body.data.chatInterface.slug;
  streamingKey = (
    await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 's', chatInterfaceId: streaming.body.data.chatInterface.id } })
  ).body.data.key;
});

/** The text of the `delta` events of an SSE body, joined. */
const deltasOf = (body: string) =>
  body
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)))
    .filter((event) => event.type === 'delta')
    .map((event) => event.text as string)
    .join('');
afterAll(async () => {
  await app?.stop();
  upstream?.close();
});

describe('an upstream reply with text PostgreSQL refuses', () => {
  it('is shown by Test Connection as a visitor would get it (NUL dropped, the lone surrogate replaced)', async () => {
    const res = await app.request('POST', `/api/v1/chat-interfaces/${rawInterfaceId}/test-connection`, { token: ownerToken, body: {} });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ ok: true, reply: 'Hello there \uFFFD and 😀', error: null });
    expect(res.text).not.toMatch(/\\u0000|\\ud800/i);
  });

  it('is answered and stored with NUL dropped and the lone surrogate replaced (JSON and SSE)', async () => {
    const res = await app.request('POST', `/api/v1/chat/${slug}`, { token: key, body: { message: 'hi' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.message).toBe('Hello there \uFFFD and 😀');
    const streamed = await app.request('POST', `/api/v1/chat/${slug}`, { token: key, body: { message: 'again' }, headers: { accept: 'text/event-stream' } });
    expect(streamed.status).toBe(200);
    expect(streamed.text).toContain('"type":"complete"');
    expect(streamed.text).not.toContain('"type":"error"');
    expect(deltasOf(streamed.text)).toBe('Hello there \uFFFD and 😀');
    const history = await app.request('GET', `/api/v1/chat-messages/history?sessionId=${res.body.sessionId}`, { token: ownerToken });
    expect(history.body.data.messages.map((m: { content: string }) => m.content)).toContain('Hello there \uFFFD and 😀');
  });

  it('is streamed to the visitor cleaned as it is stored, a surrogate pair split across two events kept whole', async () => {
    const streamed = await app.request('POST', `/api/v1/chat/${streamingSlug}`, {
      token: streamingKey,
      body: { message: 'hi' },
      headers: { accept: 'text/event-stream' },
    });
    expect(streamed.status, streamed.text).toBe(200);
    const complete = streamed.text
      .split('\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice(6)))
      .find((event) => event.type === 'complete');
    expect(complete.message).toBe('Hi 😀 and \uFFFD end\uFFFD');
    expect(deltasOf(streamed.text)).toBe(complete.message);
  });
});
