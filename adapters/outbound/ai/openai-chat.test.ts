import { countTokens } from 'gpt-tokenizer';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startMockOpenAi, mockEmbedding, type MockOpenAi } from '../../../test/helpers/openai-mock-server.ts';
import { createGuardedHttpClient, type GuardedHttpClient } from '../http/guarded-client.ts';
import { upstreamExcerpt } from './core/response.ts';
import { AiUpstreamError } from './core/upstream-error.ts';
import { chatCompletionsUrl, createChatCompletion, streamChatCompletion, type ChatRequest, type ChatStreamEvent } from './openai-chat.ts';
import { SseParser, type SseEvent } from './sse.ts';

let mock: MockOpenAi;
let http: GuardedHttpClient;

beforeAll(async () => {
  mock = await startMockOpenAi();
  http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${mock.port}`] });
});

afterAll(async () => {
  await mock.close();
});

beforeEach(() => {
  mock.setReply(() => ({}));
  mock.requests.length = 0;
});

function request(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    baseUrl: mock.url,
    apiKey: 'sk-test-123',
    model: 'gpt-test',
    messages: [
      { role: 'system', content: 'You answer questions about the knowledge base.' },
      { role: 'user', content: 'What is the refund policy?' },
    ],
    temperature: 0.2,
    maxTokens: 256,
    ...overrides,
  };
}

async function captureError(promise: Promise<unknown>): Promise<AiUpstreamError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(AiUpstreamError);
    expect((err as AiUpstreamError).source).toBe('language_model');
    return err as AiUpstreamError;
  }
  throw new Error('expected an AiUpstreamError');
}

async function collect(stream: AsyncGenerator<ChatStreamEvent>): Promise<ChatStreamEvent[]> {
  const events: ChatStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

async function waitFor(predicate: () => boolean, timeoutMs = 2000): Promise<void> {
  const start = Date.now();
  while (!predicate()) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('chatCompletionsUrl', () => {
  it('appends /v1/chat/completions without doubling /v1 and keeps full URLs', () => {
    expect(chatCompletionsUrl('https://api.example.com')).toBe('https://api.example.com/v1/chat/completions');
    expect(chatCompletionsUrl('https://api.example.com/')).toBe('https://api.example.com/v1/chat/completions');
    expect(chatCompletionsUrl('https://api.example.com/v1')).toBe('https://api.example.com/v1/chat/completions');
    expect(chatCompletionsUrl('https://api.example.com/openai/v1/')).toBe('https://api.example.com/openai/v1/chat/completions');
    expect(chatCompletionsUrl('https://api.example.com/custom/chat/completions')).toBe('https://api.example.com/custom/chat/completions');
    expect(chatCompletionsUrl('https://x.example.com/deploy/chat/completions?api-version=2024-06-01')).toBe(
      'https://x.example.com/deploy/chat/completions?api-version=2024-06-01',
    );
  });
});

describe('createChatCompletion', () => {
  it('posts the OpenAI wire format and returns text, reported usage and model', async () => {
    mock.setReply(() => ({ text: 'Refunds are accepted within 30 days.', usage: { prompt_tokens: 21, completion_tokens: 8 } }));
    const result = await createChatCompletion(http, request());
    expect(result).toEqual({
      text: 'Refunds are accepted within 30 days.',
      usage: { promptTokens: 21, completionTokens: 8, totalTokens: 29 },
      usageReported: true,
      model: 'gpt-test',
      toolCalls: [],
    });
    expect(mock.requests).toHaveLength(1);
    const sent = mock.requests[0]!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers['authorization']).toBe('Bearer sk-test-123');
    expect(sent.headers['accept']).toBe('application/json');
    expect(sent.headers['content-type']).toBe('application/json');
    expect(sent.body).toEqual({
      model: 'gpt-test',
      messages: request().messages,
      temperature: 0.2,
      max_tokens: 256,
    });
  });

  it('offers tools as functions, sends tool turns back, and reads the tool calls of a reply', async () => {
    mock.setReply(() => ({
      rawBody: JSON.stringify({
        model: 'gpt-test',
        choices: [
          {
            message: {
              role: 'assistant',
              content: null,
              tool_calls: [
                { id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"tents"}' } },
                { type: 'function', function: { arguments: '{}' } },
              ],
            },
          },
        ],
      }),
    }));
    const tools = [{ name: 'lookup', description: 'Looks things up', parameters: { type: 'object', properties: { q: { type: 'string' } } } }];
    const messages = [
      { role: 'user' as const, content: 'Find tents' },
      { role: 'assistant' as const, content: '', toolCalls: [{ id: 'call_0', name: 'lookup', arguments: '{"q":"x"}' }] },
      { role: 'tool' as const, content: '{"found":0}', toolCallId: 'call_0' },
    ];
    const result = await createChatCompletion(http, request({ messages, tools }));
    expect(result.text).toBe('');
    expect(result.toolCalls).toEqual([{ id: 'call_1', name: 'lookup', arguments: '{"q":"tents"}' }]);
    const sent = mock.requests[0]!.body;
    expect(sent.tools).toEqual([{ type: 'function', function: tools[0] }]);
    expect(sent.messages[1]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }],
    });
    expect(sent.messages[2]).toEqual({ role: 'tool', tool_call_id: 'call_0', content: '{"found":0}' });
  });

  it('does not double /v1 and omits Authorization without a key', async () => {
    await createChatCompletion(http, request({ baseUrl: `${mock.url}/v1/`, apiKey: undefined }));
    expect(mock.requests[0]!.path).toBe('/v1/chat/completions');
    expect(mock.requests[0]!.headers['authorization']).toBeUndefined();
  });

  it('counts tokens with gpt-tokenizer when the provider reports no usage', async () => {
    const text = 'Refunds are accepted within 30 days of purchase.';
    mock.setReply(() => ({ text, usage: null }));
    const req = request();
    const result = await createChatCompletion(http, req);
    expect(result.usageReported).toBe(false);
    const prompt = req.messages.reduce((sum, m) => sum + countTokens(m.content), 0);
    expect(result.usage).toEqual({ promptTokens: prompt, completionTokens: countTokens(text), totalTokens: prompt + countTokens(text) });
    expect(result.usage.completionTokens).toBeGreaterThan(5);
  });

  it('counts text containing special-token markers instead of throwing', async () => {
    mock.setReply(() => ({ text: 'ok <|endoftext|>', usage: null }));
    const result = await createChatCompletion(http, request({ messages: [{ role: 'user', content: 'say <|endoftext|>' }] }));
    expect(result.usageReported).toBe(false);
    expect(result.usage.promptTokens).toBeGreaterThan(0);
  });

  it('maps 401 and 403 to auth_failed, without the echoed key', async () => {
    for (const status of [401, 403]) {
      mock.setReply(() => ({ status, rawBody: '{"error":{"message":"Incorrect API key provided: sk-test-123"}}' }));
      const err = await captureError(createChatCompletion(http, request()));
      expect(err.kind).toBe('auth_failed');
      expect(err.status).toBe(status);
      expect(err.message).toBe(`the language-model provider rejected the API key; check the key configured for this language model (HTTP ${status})`);
      expect(err.detail).toBe('Incorrect API key provided: [redacted]');
    }
  });

  it('maps 429 to rate_limited', async () => {
    mock.setReply(() => ({ status: 429, rawBody: '{"error":{"message":"Rate limit reached for requests"}}' }));
    const err = await captureError(createChatCompletion(http, request()));
    expect(err.kind).toBe('rate_limited');
    expect(err.status).toBe(429);
    expect(err.detail).toContain('Rate limit reached');
  });

  it('maps a 500 HTML page to upstream_error with a short, tag-stripped excerpt', async () => {
    const html = `<!DOCTYPE html><html><head><title>Oops</title><style>body{color:red}</style></head><body><h1>Internal Server Error</h1><p>The upstream &amp; its <b>gateway</b> failed.</p>${'<p>padding text</p>'.repeat(50)}</body></html>`;
    mock.setReply(() => ({ status: 500, rawBody: html, headers: { 'content-type': 'text/html' } }));
    const err = await captureError(createChatCompletion(http, request()));
    expect(err.kind).toBe('upstream_error');
    expect(err.status).toBe(500);
    expect(err.message).toContain('HTTP 500');
    expect(err.message).toContain('Internal Server Error The upstream & its gateway failed.');
    expect(err.message).not.toMatch(/[<>]/);
    expect(err.message).not.toContain('color:red');
    const excerpt = err.message.slice(err.message.indexOf(': ') + 2);
    expect(excerpt.length).toBeLessThanOrEqual(200);
    expect(excerpt.endsWith('…')).toBe(true);
  });

  it('uses the message of a JSON error body', () => {
    expect(upstreamExcerpt('{"error":{"message":"The model `x` does not exist","type":"invalid_request_error"}}')).toBe('The model `x` does not exist');
    expect(upstreamExcerpt('plain\n\ntext')).toBe('plain text');
  });

  // Its tool call's arguments were printed with JSON.stringify, which recursed past the stack's end.
  it('refuses a reply nested more than 64 levels deep as invalid_response', async () => {
    const deep = `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
    const call = `{"id":"call_1","type":"function","function":{"name":"lookup","arguments":${deep}}}`;
    mock.setReply(() => ({ rawBody: `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[${call}]}}]}` }));
    const tools = [{ name: 'lookup', description: 'Looks things up', parameters: { type: 'object', properties: {} } }];
    const err = await captureError(createChatCompletion(http, request({ tools })));
    expect(err.kind).toBe('invalid_response');
  });

  it('maps non-JSON and content-less replies to invalid_response', async () => {
    mock.setReply(() => ({ rawBody: '{"choices": [ this is not json' }));
    const err = await captureError(createChatCompletion(http, request()));
    expect(err.kind).toBe('invalid_response');

    mock.setReply(() => ({ rawBody: JSON.stringify({ choices: [{ message: { role: 'assistant' } }] }) }));
    expect((await captureError(createChatCompletion(http, request()))).kind).toBe('invalid_response');

    mock.setReply(() => ({ rawBody: JSON.stringify({ choices: [] }) }));
    expect((await captureError(createChatCompletion(http, request()))).kind).toBe('invalid_response');
  });

  it('maps a provider error inside a 200 body to upstream_error', async () => {
    mock.setReply(() => ({ rawBody: JSON.stringify({ error: { message: 'model overloaded' } }) }));
    const err = await captureError(createChatCompletion(http, request()));
    expect(err.kind).toBe('upstream_error');
    expect(err.message).toContain('model overloaded');
  });

  it('maps a slow server to timeout', async () => {
    mock.setReply(() => ({ delayMs: 3000 }));
    const started = Date.now();
    const err = await captureError(createChatCompletion(http, request({ timeoutMs: 300 })));
    expect(err.kind).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(2500);
  });

  it('maps a host outside the allow-list to blocked, the guard message as detail', async () => {
    const strict = createGuardedHttpClient({ allowHosts: [] });
    const err = await captureError(createChatCompletion(strict, request()));
    expect(err.kind).toBe('blocked');
    expect(err.detail).toBe(`http://127.0.0.1:${mock.port} is not a public address`);
    expect(mock.requests).toHaveLength(0);
  });

  it('maps an invalid base URL to connection_failed', async () => {
    const err = await captureError(createChatCompletion(http, request({ baseUrl: 'not a url' })));
    expect(err.kind).toBe('connection_failed');
    expect(err.message).toBe("the language model's base URL is not valid: use a full http:// or https:// URL without credentials");
    expect(err.detail).toBe('URL is not valid');
  });

  it('maps an aborted signal to aborted', async () => {
    mock.setReply(() => ({ delayMs: 2000 }));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const err = await captureError(createChatCompletion(http, request({ signal: controller.signal })));
    expect(err.kind).toBe('aborted');
    expect(err.message).toBe('the request to the language-model provider was cancelled');
  });
});

describe('a provider echoing its credentials in a successful reply', () => {
  // The key (Bearer header) and a token written into the base URL: neither may reach the visitor.
  const withUrlToken = () => request({ baseUrl: `${mock.url}/proxy?access_token=url-token-0042` });

  it('redacts them from a whole reply', async () => {
    mock.setReply(() => ({ text: 'you sent sk-test-123 and url-token-0042' }));
    const reply = await createChatCompletion(http, withUrlToken());
    expect(reply.text).toBe('you sent [redacted] and [redacted]');
    expect(mock.requests[0]!.headers['authorization']).toBe('Bearer sk-test-123');
  });

  it('redacts them from a stream, a secret split across two events included', async () => {
    const delta = (content: string) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;
    mock.setReply(() => ({ rawChunks: [delta('key sk-te'), delta('st-123, token url-tok'), delta('en-0042.'), 'data: [DONE]\n\n'], chunkDelayMs: 1 }));
    const events = await collect(streamChatCompletion(http, withUrlToken()));
    const deltas = events.filter((e) => e.type === 'delta').map((e) => e.text);
    expect(deltas.join('')).toBe('key [redacted], token [redacted].');
    expect(deltas.some((d) => d.includes('sk-te') || d.includes('url-tok'))).toBe(false);
    expect(events.at(-1)).toMatchObject({ type: 'done', text: 'key [redacted], token [redacted].' });
  });
});

describe('streamChatCompletion', () => {
  it('yields deltas whose concatenation is the final text, then the include_usage usage', async () => {
    const text = 'Refunds are accepted within 30 days of purchase, with the receipt.';
    mock.setReply(() => ({ text, usage: { prompt_tokens: 40, completion_tokens: 14 } }));
    const events = await collect(streamChatCompletion(http, request()));
    const deltas = events.filter((e) => e.type === 'delta');
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    const done = events.at(-1);
    expect(done).toEqual({ type: 'done', text, usage: { promptTokens: 40, completionTokens: 14, totalTokens: 54 }, usageReported: true });
    expect(deltas.map((d) => d.text).join('')).toBe(text);
    expect(events.filter((e) => e.type === 'done')).toHaveLength(1);

    const sent = mock.requests[0]!;
    expect(sent.headers['accept']).toBe('text/event-stream');
    expect(sent.body).toMatchObject({ model: 'gpt-test', stream: true, stream_options: { include_usage: true }, max_tokens: 256, temperature: 0.2 });
  });

  it('counts usage when the stream carries none', async () => {
    const text = 'Shipping takes three to five business days.';
    mock.setReply(() => ({ text, usage: null }));
    const events = await collect(streamChatCompletion(http, request()));
    const done = events.at(-1);
    expect(done?.type).toBe('done');
    if (done?.type !== 'done') return;
    expect(done.usageReported).toBe(false);
    expect(done.usage.completionTokens).toBe(countTokens(text));
  });

  it('parses comments, CRLF, multi-line events and chunks split mid-line', async () => {
    const event1 = JSON.stringify({ choices: [{ index: 0, delta: { content: 'Hello' } }] });
    const event2 = JSON.stringify({ choices: [{ index: 0, delta: { content: ', world' } }] });
    const usage = JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
    // A multi-line event's data lines are joined with '\n' (valid between JSON tokens): split event2 after its first '{'.
    const wire = `: keep-alive\r\n\r\ndata: ${event1}\r\n\r\nevent: message\ndata: {\ndata: ${event2.slice(1)}\n\ndata: ${usage}\r\rdata: [DONE]\n\n`;
    const pieces: string[] = [];
    for (let i = 0; i < wire.length; i += 7) pieces.push(wire.slice(i, i + 7));
    mock.setReply(() => ({ rawChunks: pieces, chunkDelayMs: 1 }));
    const events = await collect(streamChatCompletion(http, request()));
    expect(events).toEqual([
      { type: 'delta', text: 'Hello' },
      { type: 'delta', text: ', world' },
      { type: 'done', text: 'Hello, world', usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5 }, usageReported: true },
    ]);
  });

  it('maps stream errors: 401 → auth_failed, 500 → upstream_error, malformed event → invalid_response, empty stream → invalid_response', async () => {
    mock.setReply(() => ({ status: 401 }));
    expect((await captureError(collect(streamChatCompletion(http, request())))).kind).toBe('auth_failed');

    mock.setReply(() => ({ status: 500, rawBody: '<html><body><h1>Bad gateway</h1></body></html>' }));
    const upstream = await captureError(collect(streamChatCompletion(http, request())));
    expect(upstream.kind).toBe('upstream_error');
    expect(upstream.message).toContain('Bad gateway');
    expect(upstream.message).not.toContain('<');

    mock.setReply(() => ({ rawBody: 'data: {not json}\n\n' }));
    expect((await captureError(collect(streamChatCompletion(http, request())))).kind).toBe('invalid_response');

    mock.setReply(() => ({ rawBody: ': only a comment\n\n' }));
    expect((await captureError(collect(streamChatCompletion(http, request())))).kind).toBe('invalid_response');

    mock.setReply(() => ({ rawBody: 'data: {"error":{"message":"context length exceeded"}}\n\n' }));
    const midStream = await captureError(collect(streamChatCompletion(http, request())));
    expect(midStream.kind).toBe('upstream_error');
    expect(midStream.message).toContain('context length exceeded');
  });

  it('accepts a provider that ignores stream:true and answers JSON', async () => {
    mock.setReply(() => ({
      rawBody: JSON.stringify({
        model: 'm',
        choices: [{ message: { role: 'assistant', content: 'All in one.' } }],
        usage: { prompt_tokens: 1, completion_tokens: 3 },
      }),
      headers: { 'content-type': 'application/json' },
    }));
    const events = await collect(streamChatCompletion(http, request()));
    expect(events).toEqual([
      { type: 'delta', text: 'All in one.' },
      { type: 'done', text: 'All in one.', usage: { promptTokens: 1, completionTokens: 3, totalTokens: 4 }, usageReported: true },
    ]);
  });

  it('times out a stream that stalls', async () => {
    mock.setReply(() => ({ chunkDelayMs: 5000 }));
    const err = await captureError(collect(streamChatCompletion(http, request({ timeoutMs: 300 }))));
    expect(err.kind).toBe('timeout');
  });

  it('stops on abort mid-stream and closes the upstream connection', async () => {
    mock.setReply(() => ({ text: 'one two three four five six seven eight nine ten', chunkDelayMs: 200 }));
    const controller = new AbortController();
    const received: string[] = [];
    let error: unknown;
    try {
      for await (const event of streamChatCompletion(http, request({ signal: controller.signal }))) {
        if (event.type === 'delta') {
          received.push(event.text);
          controller.abort();
        }
      }
    } catch (err) {
      error = err;
    }
    expect(received).toHaveLength(1);
    expect(error).toBeInstanceOf(AiUpstreamError);
    expect((error as AiUpstreamError).kind).toBe('aborted');
    await waitFor(() => mock.requests[0]?.aborted === true);
  });

  it('closes the upstream connection when the consumer stops early', async () => {
    mock.setReply(() => ({ text: 'one two three four five six seven eight nine ten', chunkDelayMs: 200 }));
    for await (const event of streamChatCompletion(http, request())) {
      if (event.type === 'delta') break;
    }
    await waitFor(() => mock.requests[0]?.aborted === true);
  });

  it('maps a blocked host to blocked, the guard message as detail', async () => {
    const strict = createGuardedHttpClient({ allowHosts: [] });
    const err = await captureError(collect(streamChatCompletion(strict, request())));
    expect(err.kind).toBe('blocked');
    expect(err.detail).toBe(`http://127.0.0.1:${mock.port} is not a public address`);
  });
});

describe('mock embeddings', () => {
  it('returns deterministic 16-dimension unit vectors with usage', async () => {
    const response = await http.request(`${mock.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'text-embedding-3-small', input: ['alpha beta', 'gamma'] }),
    });
    expect(response.status).toBe(200);
    const body = response.json() as { data: Array<{ index: number; embedding: number[] }>; usage: { prompt_tokens: number } };
    expect(body.data).toHaveLength(2);
    expect(body.data[0]!.embedding).toHaveLength(16);
    expect(body.data[0]!.embedding).toEqual(mockEmbedding('alpha beta'));
    expect(body.data[1]!.embedding).not.toEqual(body.data[0]!.embedding);
    const norm = Math.hypot(...body.data[1]!.embedding);
    expect(norm).toBeCloseTo(1, 6);
    expect(body.usage.prompt_tokens).toBe(3);
  });
});

describe('SseParser', () => {
  function feed(pieces: Array<string | Uint8Array>): SseEvent[] {
    const parser = new SseParser();
    const events = pieces.flatMap((p) => parser.push(p));
    return [...events, ...parser.end()];
  }

  it('handles CRLF split between chunks, comments, multi-line data and fields', () => {
    const events = feed(['\uFEFF: hi\r', '\nid: 7\r\nevent: update\r\ndata: a\r', '\ndata: b\r\n', '\r\ndata:c\n\n']);
    expect(events).toEqual([
      { event: 'update', data: 'a\nb', id: '7', retry: undefined },
      { event: 'message', data: 'c', id: '7', retry: undefined },
    ]);
  });

  it('decodes UTF-8 split inside a character and flushes a trailing event at end', () => {
    const bytes = Buffer.from('data: héllo €\n\ndata: tail', 'utf8');
    const pieces = [...bytes].map((b) => Uint8Array.of(b));
    expect(feed(pieces).map((e) => e.data)).toEqual(['héllo €', 'tail']);
  });

  it('drops events without data and ignores unknown fields', () => {
    expect(feed(['event: ping\n\nfoo: bar\ndata\n\n'])).toEqual([{ event: 'message', data: '', id: undefined, retry: undefined }]);
  });
});
