import nodeHttp from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGuardedHttpClient, type GuardedHttpClient } from '../../http/guarded-client.ts';
import { startProviderMock, type ProviderMock } from '../../../../test/helpers/provider-mock-servers.ts';
import { callEndpoint, streamEndpoint } from './connector.ts';
import type { ConnectorReply, ConnectorRequest } from './types.ts';

const KEY = 'sk-test-7f3a9c1d2e4b';

let mock: ProviderMock;
let http: GuardedHttpClient;

beforeAll(async () => {
  mock = await startProviderMock();
  http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${mock.port}`] });
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => mock.reset());

async function collect(req: ConnectorRequest): Promise<{ deltas: string[]; reply: ConnectorReply; events: number }> {
  const deltas: string[] = [];
  let reply: ConnectorReply | undefined;
  let events = 0;
  for await (const event of streamEndpoint(http, req)) {
    events += 1;
    expect(reply, 'nothing may follow done').toBeUndefined();
    if (event.type === 'delta') deltas.push(event.text);
    else reply = event.reply;
  }
  if (reply === undefined) throw new Error('no done event');
  return { deltas, reply, events };
}

function only() {
  expect(mock.requests).toHaveLength(1);
  return mock.requests[0]!;
}

function expectJsonHeaders(headers: Record<string, unknown>, stream: boolean): void {
  expect(headers['content-type']).toBe('application/json');
  if (stream) expect(String(headers['accept'])).toContain('application/json');
  else expect(headers['accept']).toBe('application/json');
}

const history = [
  { role: 'user' as const, content: 'My name is Ada.' },
  { role: 'assistant' as const, content: 'Nice to meet you, Ada.' },
];

describe('flow platform (Langflow)', () => {
  const url = () => `${mock.url}/langflow/api/v1/run/flow-42`;

  it('posts input_value/output_type/input_type/session_id with Bearer and x-api-key, and reads results.message.text', async () => {
    const reply = await callEndpoint(http, { endpointUrl: url(), apiKey: KEY, message: 'Hello flow', sessionId: 'sess-1', history, systemPrompt: 'ignored' });
    expect(reply).toMatchObject({ type: 'flow', text: 'Echo: Hello flow', status: 200, usage: null });
    expect(reply.latencyMs).toBeGreaterThanOrEqual(0);
    const req = only();
    expect(req.path).toBe('/langflow/api/v1/run/flow-42');
    expect(req.query).toEqual({});
    expectJsonHeaders(req.headers, false);
    expect(req.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(req.headers['x-api-key']).toBe(KEY);
    // Only the current message: the flow keeps its own memory per session_id.
    expect(req.body).toEqual({ input_value: 'Hello flow', output_type: 'chat', input_type: 'chat', session_id: 'sess-1' });
  });

  it('streams with ?stream=true and its token events', async () => {
    const { deltas, reply } = await collect({ endpointUrl: url(), apiKey: KEY, message: 'stream me please', sessionId: 'sess-2' });
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('Echo: stream me please');
    expect(reply).toMatchObject({ type: 'flow', text: 'Echo: stream me please', status: 200 });
    const req = only();
    expect(req.query).toEqual({ stream: 'true' });
    expectJsonHeaders(req.headers, true);
    expect(req.headers['x-api-key']).toBe(KEY);
    expect(req.body).toEqual({ input_value: 'stream me please', output_type: 'chat', input_type: 'chat', session_id: 'sess-2' });
  });

  it('is used for any URL when the owner overrides the type', async () => {
    const reply = await callEndpoint(http, { endpointUrl: `${mock.url}/api/v1/run/abc`, type: 'flow', message: 'override', sessionId: 's' });
    expect(reply).toMatchObject({ type: 'flow', text: 'Echo: override' });
    expect(only().headers['authorization']).toBeUndefined();
  });
});

describe('OpenAI-compatible', () => {
  const url = () => `${mock.url}/v1/chat/completions`;

  it('posts model/messages/temperature with history and system prompt, Bearer auth, and reads choices[0].message.content', async () => {
    const reply = await callEndpoint(http, {
      endpointUrl: `${url()}?model=llama3.2`,
      apiKey: KEY,
      message: 'What is my name?',
      sessionId: 's',
      history,
      systemPrompt: 'Be brief.',
      temperature: 0.2,
    });
    expect(reply.type).toBe('openai');
    expect(reply.text).toBe('Echo: What is my name?');
    // The mock counts words (+4 per message) and reply pieces.
    expect(reply.usage).toEqual({ promptTokens: 31, completionTokens: 5, totalTokens: 36 });
    const req = only();
    // Our `model=` convention is not forwarded.
    expect(req.url).toBe('/v1/chat/completions');
    expectJsonHeaders(req.headers, false);
    expect(req.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(req.headers['x-api-key']).toBeUndefined();
    expect(req.body).toEqual({
      model: 'llama3.2',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'My name is Ada.' },
        { role: 'assistant', content: 'Nice to meet you, Ada.' },
        { role: 'user', content: 'What is my name?' },
      ],
      temperature: 0.2,
    });
  });

  it('defaults the model and temperature and sends no auth header to a local server without a key', async () => {
    const reply = await callEndpoint(http, { endpointUrl: url(), message: 'hi', sessionId: 's' });
    expect(reply.text).toBe('Echo: hi');
    const req = only();
    expect(req.headers['authorization']).toBeUndefined();
    expect(req.body).toMatchObject({ model: 'gpt-4o-mini', temperature: 0.7, messages: [{ role: 'user', content: 'hi' }] });
  });

  it('streams deltas and the include_usage usage', async () => {
    const { deltas, reply } = await collect({ endpointUrl: url(), apiKey: KEY, message: 'count to three', sessionId: 's', history });
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('Echo: count to three');
    expect(reply).toMatchObject({ type: 'openai', text: 'Echo: count to three', status: 200 });
    expect(reply.usage?.completionTokens).toBe(4);
    const req = only();
    expectJsonHeaders(req.headers, true);
    expect(req.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(req.body.messages).toHaveLength(3);
  });
});

describe('messages-style (Anthropic)', () => {
  const url = () => `${mock.url}/claude/v1/messages`;

  it('posts model/max_tokens/messages/system with x-api-key, anthropic-version and Bearer, and reads content text', async () => {
    const reply = await callEndpoint(http, { endpointUrl: url(), apiKey: KEY, message: 'And now?', sessionId: 's', history, systemPrompt: 'You are terse.' });
    expect(reply).toMatchObject({ type: 'messages', text: 'Echo: And now?', status: 200 });
    expect(reply.usage).toEqual({ promptTokens: 14, completionTokens: 3, totalTokens: 17 });
    const req = only();
    expectJsonHeaders(req.headers, false);
    expect(req.headers['x-api-key']).toBe(KEY);
    expect(req.headers['anthropic-version']).toBe('2023-06-01');
    expect(req.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(req.body).toEqual({
      model: 'claude-haiku-4-5',
      max_tokens: 2048,
      messages: [
        { role: 'user', content: 'My name is Ada.' },
        { role: 'assistant', content: 'Nice to meet you, Ada.' },
        { role: 'user', content: 'And now?' },
      ],
      system: 'You are terse.',
    });
  });

  it('makes history strictly alternating and starting with the user', async () => {
    await callEndpoint(http, {
      endpointUrl: `${url()}?model=claude-sonnet-4-5`,
      message: 'third',
      sessionId: 's',
      history: [
        { role: 'assistant', content: 'Welcome!' },
        { role: 'user', content: 'first' },
        { role: 'user', content: 'second' },
        { role: 'assistant', content: '' },
      ],
      maxTokens: 100,
      temperature: 0,
    });
    const req = only();
    expect(req.url).toBe('/claude/v1/messages');
    expect(req.body).toEqual({
      model: 'claude-sonnet-4-5',
      max_tokens: 100,
      temperature: 0,
      messages: [{ role: 'user', content: 'first\n\nsecond\n\nthird' }],
    });
  });

  it('streams content_block_delta text and the message_start/message_delta usage', async () => {
    const { deltas, reply } = await collect({ endpointUrl: url(), apiKey: KEY, message: 'stream it now', sessionId: 's', history });
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('Echo: stream it now');
    expect(reply).toMatchObject({ type: 'messages', text: 'Echo: stream it now', usage: { promptTokens: 12, completionTokens: 4, totalTokens: 16 } });
    const req = only();
    expect(req.body).toMatchObject({ stream: true });
    expect(req.headers['anthropic-version']).toBe('2023-06-01');
  });
});

describe('generation-style (Gemini)', () => {
  const url = () => `${mock.url}/v1beta/models/gemini-2.5-flash:generateContent`;

  it('posts contents/generationConfig with x-goog-api-key and reads candidates[0].content.parts', async () => {
    const reply = await callEndpoint(http, {
      endpointUrl: url(),
      type: 'generation',
      apiKey: KEY,
      message: 'Who am I?',
      sessionId: 's',
      history,
      systemPrompt: 'Be kind.',
      maxTokens: 64,
    });
    expect(reply).toMatchObject({ type: 'generation', text: 'Echo: Who am I?', status: 200 });
    expect(reply.usage).toEqual({ promptTokens: 12, completionTokens: 4, totalTokens: 16 });
    const req = only();
    expect(req.path).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expectJsonHeaders(req.headers, false);
    expect(req.headers['x-goog-api-key']).toBe(KEY);
    expect(req.body).toEqual({
      contents: [
        { role: 'user', parts: [{ text: 'My name is Ada.' }] },
        { role: 'model', parts: [{ text: 'Nice to meet you, Ada.' }] },
        { role: 'user', parts: [{ text: 'Who am I?' }] },
      ],
      generationConfig: { temperature: 0.7, maxOutputTokens: 64 },
      systemInstruction: { parts: [{ text: 'Be kind.' }] },
    });
  });

  it('streams through :streamGenerateContent?alt=sse', async () => {
    const { deltas, reply } = await collect({ endpointUrl: url(), type: 'generation', apiKey: KEY, message: 'tell me more', sessionId: 's' });
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('Echo: tell me more');
    expect(reply).toMatchObject({ type: 'generation', text: 'Echo: tell me more', usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 } });
    const req = only();
    expect(req.path).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent');
    expect(req.query).toEqual({ alt: 'sse' });
  });

  it('fills an empty ?key= parameter with the key', async () => {
    await callEndpoint(http, { endpointUrl: `${url()}?key=`, type: 'generation', apiKey: KEY, message: 'k', sessionId: 's' });
    expect(only().query).toEqual({ key: KEY });
  });
});

describe('generic', () => {
  const url = () => `${mock.url}/generic`;

  it('posts message/session_id with x-api-key (and Bearer) and reads response', async () => {
    const reply = await callEndpoint(http, { endpointUrl: url(), apiKey: KEY, message: 'Hi <b>there</b>', sessionId: 'sess-9', history, systemPrompt: 'x' });
    // Plain text, returned as sent: never stripped or escaped.
    expect(reply).toEqual({ type: 'generic', text: 'Echo: Hi <b>there</b>', status: 200, latencyMs: expect.any(Number), usage: null });
    const req = only();
    expectJsonHeaders(req.headers, false);
    expect(req.headers['x-api-key']).toBe(KEY);
    expect(req.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(req.body).toEqual({ message: 'Hi <b>there</b>', session_id: 'sess-9' });
  });

  it('streams as one delta then done', async () => {
    const { deltas, reply, events } = await collect({ endpointUrl: url(), message: 'one shot', sessionId: 's' });
    expect(deltas).toEqual(['Echo: one shot']);
    expect(events).toBe(2);
    expect(reply).toMatchObject({ type: 'generic', text: 'Echo: one shot', status: 200 });
    expect(only().body).toEqual({ message: 'one shot', session_id: 's' });
  });

  it('fills an api_key placeholder in the query, keeps other parameters, adds none when absent', async () => {
    for (const placeholder of ['', '%7BAPI_KEY%7D', 'YOUR_API_KEY', '{{API_KEY}}', '<API_KEY>']) {
      mock.reset();
      await callEndpoint(http, { endpointUrl: `${url()}?tenant=a%20b&api_key=${placeholder}&x=1`, apiKey: KEY, message: 'm', sessionId: 's' });
      const req = only();
      expect(req.url).toBe(`/generic?tenant=a%20b&api_key=${KEY}&x=1`);
      expect(req.headers['x-api-key']).toBe(KEY);
    }
    mock.reset();
    await callEndpoint(http, { endpointUrl: `${url()}?api_key=owner-real-key`, apiKey: KEY, message: 'm', sessionId: 's' });
    expect(only().query).toEqual({ api_key: 'owner-real-key' });
    mock.reset();
    await callEndpoint(http, { endpointUrl: url(), apiKey: KEY, message: 'm', sessionId: 's' });
    expect(only().url).toBe('/generic');
  });
});

describe('a reply that echoes the key', () => {
  // The mock echoes the visitor's message, so a message holding the key makes each type's reply hold it.
  const urls = {
    flow: () => `${mock.url}/langflow/api/v1/run/flow-42`,
    openai: () => `${mock.url}/v1/chat/completions`,
    messages: () => `${mock.url}/claude/v1/messages`,
    generation: () => `${mock.url}/v1beta/models/gemini-2.5-flash:generateContent`,
    generic: () => `${mock.url}/generic`,
  };

  it.each(Object.keys(urls) as Array<keyof typeof urls>)('%s: the key is redacted from the reply and from every delta', async (type) => {
    const req = { endpointUrl: urls[type](), type, apiKey: KEY, message: `my key is Bearer ${KEY}, right?`, sessionId: 's' };
    const reply = await callEndpoint(http, req);
    expect(reply.text).toBe('Echo: my key is Bearer [redacted], right?');
    const streamed = await collect(req);
    expect(streamed.deltas.join('')).toBe('Echo: my key is Bearer [redacted], right?');
    expect(streamed.reply.text).toBe('Echo: my key is Bearer [redacted], right?');
  });
});

describe('streaming', () => {
  it('closes the upstream request when the consumer stops early', async () => {
    const stream = streamEndpoint(http, { endpointUrl: `${mock.url}/v1/chat/completions`, message: 'a b c d e f g h i j k l m n o p', sessionId: 's' });
    const first = await stream.next();
    expect(first.value).toMatchObject({ type: 'delta' });
    await stream.return(undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(only().aborted).toBe(true);
  });

  it('falls back to one delta with the whole text when an upstream ignores stream: true', async () => {
    const server = nodeHttp.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          choices: [{ index: 0, message: { role: 'assistant', content: 'all at once' } }],
          usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 },
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${port}`] });
      const events = [];
      for await (const event of streamEndpoint(client, { endpointUrl: `http://127.0.0.1:${port}/v1/chat/completions`, message: 'm', sessionId: 's' }))
        events.push(event);
      expect(events).toEqual([
        { type: 'delta', text: 'all at once' },
        {
          type: 'done',
          reply: {
            type: 'openai',
            text: 'all at once',
            status: 200,
            latencyMs: expect.any(Number),
            usage: { promptTokens: 3, completionTokens: 3, totalTokens: 6 },
          },
        },
      ]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
