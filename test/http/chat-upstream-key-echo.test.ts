import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

// An upstream that answers 200 with the key it was sent (a debugging endpoint, a model that repeats its prompt)
// must not hand it to the visitor, nor to the stored history: it is redacted as in an upstream's error.
const UPSTREAM_KEY = 'upstream-secret-key-1234567890';
const URL_KEY = 'key-in-the-url-0987654321';

let app: TestApp;
let upstream: Server;
let ownerToken: string;
const chats: Record<'json' | 'streaming' | 'urlKey', { slug: string; key: string; id: string }> = {} as never;

/** The key the connector sent, read back from the Bearer header as an echoing upstream would. */
const sentKey = (req: IncomingMessage) => String(req.headers['authorization'] ?? '').replace(/^Bearer /, '');

beforeAll(async () => {
  upstream = createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (chunk: Buffer) => body.push(chunk));
    req.on('end', () => {
      const key = sentKey(req);
      if (req.url === '/v1/chat/completions' && JSON.parse(Buffer.concat(body).toString()).stream === true) {
        // The key split between two events (and two TCP writes): neither half may reach the visitor on its own.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const piece of [`your key is Bearer ${key.slice(0, 12)}`, `${key.slice(12)}, keep it safe`])
          res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: piece } }] })}\n\n`);
        res.end('data: [DONE]\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      // /bot-url echoes the request's URL, with the key its owner wrote into the query.
      const response = req.url?.startsWith('/bot-url') ? `you called ${req.url}` : `your key is ${req.headers['authorization']}`;
      res.end(JSON.stringify({ response }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const port = (upstream.address() as AddressInfo).port;
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${port}` });
  const owner = await app.signUp('key-echo');
  ownerToken = owner.token;
  const create = async (name: string, endpoint: Record<string, string>) => {
    const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: ownerToken, body: { name, apiKey: UPSTREAM_KEY, ...endpoint } });
    expect(ci.status, ci.text).toBe(201);
    const id = ci.body.data.chatInterface.id;
    const key = (await app.request('POST', '/api/v1/api-keys', { token: ownerToken, body: { name, chatInterfaceId: id } })).body.data.key;
    return { slug: ci.body.data.chatInterface.slug, key, id };
  };
  chats.json = await create('Echo JSON', { endpointUrl: `http://127.0.0.1:${port}/bot` });
  chats.streaming = await create('Echo stream', { endpointUrl: `http://127.0.0.1:${port}/v1/chat/completions`, endpointType: 'openai' });
  chats.urlKey = await create('Echo URL', { endpointUrl: `http://127.0.0.1:${port}/bot-url?api_key=${URL_KEY}` });
});
afterAll(async () => {
  await app?.stop();
  upstream?.close();
});

/** The `delta` and `complete` events of an SSE body. */
function eventsOf(body: string) {
  const events = body
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)));
  return { deltas: events.filter((e) => e.type === 'delta').map((e) => e.text as string), complete: events.find((e) => e.type === 'complete') };
}

async function storedReplies(sessionId: string): Promise<string[]> {
  const history = await app.request('GET', `/api/v1/chat-messages/history?sessionId=${sessionId}`, { token: ownerToken });
  expect(history.status, history.text).toBe(200);
  return history.body.data.messages.filter((m: { role: string }) => m.role === 'assistant').map((m: { content: string }) => m.content);
}

/** A chat message asking for Server-Sent Events. */
const streamChat = (chat: { slug: string; key: string }, message: string) =>
  app.request('POST', `/api/v1/chat/${chat.slug}`, { token: chat.key, body: { message }, headers: { accept: 'text/event-stream' } });

describe('an upstream that echoes its API key in a successful reply', () => {
  it('a key written into the endpoint URL and echoed back is redacted too', async () => {
    const res = await app.request('POST', `/api/v1/chat/${chats.urlKey.slug}`, { token: chats.urlKey.key, body: { message: 'where am I?' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.message).toBe('you called /bot-url?api_key=[redacted]');
    expect(await storedReplies(res.body.sessionId)).toEqual(['you called /bot-url?api_key=[redacted]']);
  });

  it('JSON reply: the visitor and the history get [redacted]', async () => {
    const res = await app.request('POST', `/api/v1/chat/${chats.json.slug}`, { token: chats.json.key, body: { message: 'what is my key?' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.message).toBe('your key is Bearer [redacted]');
    expect(res.text).not.toContain(UPSTREAM_KEY);
    expect(await storedReplies(res.body.sessionId)).toEqual(['your key is Bearer [redacted]']);
  });

  it('streamed reply, the key split across two events: no delta, the complete event nor the history holds it', async () => {
    const res = await streamChat(chats.streaming, 'what is my key?');
    expect(res.status, res.text).toBe(200);
    const { deltas, complete } = eventsOf(res.text);
    expect(deltas.join('')).toBe('your key is Bearer [redacted], keep it safe');
    expect(complete.message).toBe('your key is Bearer [redacted], keep it safe');
    // Not even half of it: the first event's end was held back until the second showed it was the key.
    expect(res.text).not.toContain(UPSTREAM_KEY.slice(0, 12));
    expect(await storedReplies(complete.sessionId)).toEqual(['your key is Bearer [redacted], keep it safe']);
  });

  it('streamed request to an upstream answering one JSON document, and Test Connection: [redacted] too', async () => {
    const res = await streamChat(chats.json, 'again');
    expect(res.status, res.text).toBe(200);
    expect(eventsOf(res.text).deltas.join('')).toBe('your key is Bearer [redacted]');
    expect(res.text).not.toContain(UPSTREAM_KEY);
    const tested = await app.request('POST', `/api/v1/chat-interfaces/${chats.json.id}/test-connection`, { token: ownerToken, body: {} });
    expect(tested.status, tested.text).toBe(200);
    expect(tested.body.data).toMatchObject({ ok: true, reply: 'your key is Bearer [redacted]' });
  });
});
