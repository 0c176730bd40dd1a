/**
 * One local HTTP server imitating the wire formats of the AI endpoints the
 * outbound connector talks to, for tests.
 *
 *   const mock = await startProviderMock();
 *   const http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${mock.port}`] });
 *   await callEndpoint(http, { endpointUrl: `${mock.url}/v1/chat/completions`, ... });
 *   mock.requests[0].headers / .body;   mock.setMode('429');   await mock.close();
 *
 * Routes (POST; any prefix before them is accepted, so `/langflow/api/v1/run/x` works):
 *  - `/api/v1/run/:flow` — Langflow run result; with `?stream=true`, its
 *    stream: JSON objects separated by blank lines (`add_message`, `token`
 *    events with `data.chunk`, then `end` with the whole result);
 *  - `/v1/chat/completions` — OpenAI chat completion; SSE chunks + usage chunk + `[DONE]` when `stream: true`;
 *  - `/v1/messages` — Anthropic message; SSE (message_start, content_block_start,
 *    ping, content_block_delta text_delta, content_block_stop, message_delta
 *    with usage, message_stop) when `stream: true`; requires `anthropic-version`;
 *  - `/v1beta/models/:model:generateContent` and `:streamGenerateContent`
 *    (SSE with `alt=sse`, else a JSON array like the real API);
 *  - `/generic` — `{response: ...}`;
 *  - `/redirect-target` — where 'redirect-private' points; a request here means a redirect was followed.
 * A request body not in the route's format gets the provider-style 400.
 * The reply text is `Echo: <message>` (the last user message of the request).
 *
 * Failure switches (`setMode`) apply to every provider route:
 * 'slow' (answers after `delayMs`, default 2 s), 'non-json' (200 HTML page),
 * 'wrong-shape' (200 JSON without any text field), 'too-deep' (200 JSON whose `error` nests 20,000 levels), '401' (provider-style
 * error echoing the API key it received, to test redaction), '429', '500'
 * (HTML error page), 'redirect-private' (302 to http://127.0.0.1:<port>/redirect-target).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProviderMockMode = 'normal' | 'slow' | 'non-json' | 'wrong-shape' | 'too-deep' | '401' | '429' | '500' | 'redirect-private';

export type ProviderRoute = 'langflow' | 'openai' | 'anthropic' | 'gemini' | 'generic' | 'redirect-target';

export interface ProviderMockRequest {
  method: string;
  /** Path without the query. */
  path: string;
  /** Decoded query parameters. */
  query: Record<string, string>;
  /** Path with the query, as sent. */
  url: string;
  route: ProviderRoute | null;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON, or the raw text when the body is not JSON. */
  body: any;
  /** The client closed the connection before the response was complete. */
  aborted: boolean;
}

export interface ProviderMock {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  requests: ProviderMockRequest[];
  setMode(mode: ProviderMockMode, options?: { delayMs?: number }): void;
  /** Back to 'normal' and no recorded requests. */
  reset(): void;
  close(): Promise<void>;
}

export const REDIRECT_TARGET_PATH = '/redirect-target';

export function echoText(message: string): string {
  return `Echo: ${message}`;
}

export async function startProviderMock(): Promise<ProviderMock> {
  const requests: ProviderMockRequest[] = [];
  let mode: ProviderMockMode = 'normal';
  let delayMs = 2000;
  let port = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any = raw;
      try {
        body = raw === '' ? undefined : JSON.parse(raw);
      } catch {
        // keep the raw text
      }
      const parsed = new URL(req.url ?? '/', 'http://mock.invalid');
      const record: ProviderMockRequest = {
        method: req.method ?? 'GET',
        path: parsed.pathname,
        query: Object.fromEntries(parsed.searchParams),
        url: req.url ?? '/',
        route: routeOf(parsed.pathname),
        headers: { ...req.headers },
        body,
        aborted: false,
      };
      requests.push(record);
      res.on('close', () => {
        if (!res.writableFinished) record.aborted = true;
      });
      void respond(res, record).catch(() => res.destroy());
    });
  });

  async function respond(res: http.ServerResponse, record: ProviderMockRequest): Promise<void> {
    const route = record.route;
    if (route === null) return sendJson(res, 404, { error: { message: `no route for ${record.path}` } });
    if (record.method !== 'POST') return sendJson(res, 405, { error: { message: 'method not allowed' } });
    if (route === 'redirect-target') return sendJson(res, 200, { response: 'the redirect target was contacted' });

    switch (mode) {
      case 'slow':
        await sleep(delayMs, res);
        if (res.destroyed) return;
        break;
      case 'non-json':
        return sendRaw(res, 200, 'text/html; charset=utf-8', '<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>');
      case 'wrong-shape':
        return sendJson(res, 200, { status: 'ok', data: { unexpected: ['shape'] }, id: 42 });
      case 'too-deep':
        return sendRaw(res, 200, 'application/json', `{"error":${'{"a":'.repeat(20_000)}1${'}'.repeat(20_001)}`);
      case '401':
        return sendJson(res, 401, authError(route, receivedKey(record)));
      case '429':
        return sendJson(res, 429, providerError(route, 429, 'Rate limit reached for requests'), { 'retry-after': '1' });
      case '500':
        return sendRaw(
          res,
          500,
          'text/html',
          '<html><head><title>500</title></head><body><h1>Internal Server Error</h1><p>upstream exploded</p></body></html>',
        );
      case 'redirect-private':
        res.writeHead(302, { location: `http://127.0.0.1:${port}${REDIRECT_TARGET_PATH}`, 'content-length': '0' });
        res.end();
        return;
      case 'normal':
        break;
    }

    switch (route) {
      case 'langflow':
        return langflow(res, record);
      case 'openai':
        return openai(res, record);
      case 'anthropic':
        return anthropic(res, record);
      case 'gemini':
        return gemini(res, record);
      case 'generic':
        return generic(res, record);
    }
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    setMode(next, options) {
      mode = next;
      delayMs = options?.delayMs ?? 2000;
    },
    reset() {
      mode = 'normal';
      delayMs = 2000;
      requests.length = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function routeOf(path: string): ProviderRoute | null {
  if (/\/api\/v1\/run\/[^/]+\/?$/.test(path)) return 'langflow';
  if (/\/v1\/chat\/completions$/.test(path)) return 'openai';
  if (/\/v1\/messages$/.test(path)) return 'anthropic';
  if (/\/models\/[^/:]+:(generateContent|streamGenerateContent)$/.test(path)) return 'gemini';
  if (/\/generic$/.test(path)) return 'generic';
  if (path === REDIRECT_TARGET_PATH) return 'redirect-target';
  return null;
}

// ---------------------------------------------------------------------------
// Langflow

function langflow(res: http.ServerResponse, record: ProviderMockRequest): Promise<void> | void {
  const body = record.body;
  if (!isRecord(body) || typeof body.input_value !== 'string') {
    return sendJson(res, 422, { detail: [{ type: 'missing', loc: ['body', 'input_value'], msg: 'Field required' }] });
  }
  const sessionId = typeof body.session_id === 'string' ? body.session_id : 'mock-session';
  const text = echoText(body.input_value);
  const flowId = record.path.split('/').filter(Boolean).pop() ?? 'flow';
  const result = langflowResult(flowId, sessionId, body.input_value, text);
  if (record.query.stream !== 'true') return sendJson(res, 200, result);

  const messageId = 'mock-message-2';
  const message = (sender: 'User' | 'Machine', id: string, t: string) => ({
    timestamp: '2025-01-01T00:00:00',
    sender,
    sender_name: sender === 'User' ? 'User' : 'AI',
    session_id: sessionId,
    text: t,
    files: [],
    error: false,
    edit: false,
    properties: { state: 'complete' },
    category: 'message',
    content_blocks: [],
    id,
    flow_id: flowId,
  });
  const events: unknown[] = [
    { event: 'add_message', data: message('User', 'mock-message-1', body.input_value) },
    { event: 'add_message', data: message('Machine', messageId, '') },
    ...splitWords(text).map((chunk) => ({ event: 'token', data: { chunk, id: messageId, timestamp: '2025-01-01 00:00:00 UTC' } })),
    { event: 'end', data: { result } },
  ];
  return streamChunks(
    res,
    'text/event-stream; charset=utf-8',
    events.map((e) => `${JSON.stringify(e)}\n\n`),
  );
}

function langflowResult(flowId: string, sessionId: string, input: string, text: string): unknown {
  const message = {
    text,
    sender: 'Machine',
    sender_name: 'AI',
    session_id: sessionId,
    timestamp: '2025-01-01T00:00:00+00:00',
    flow_id: flowId,
    properties: { source: { id: 'OpenAIModel-mock', display_name: 'OpenAI', source: 'gpt-4o-mini' }, state: 'complete' },
    category: 'message',
    content_blocks: [],
  };
  return {
    session_id: sessionId,
    outputs: [
      {
        inputs: { input_value: input },
        outputs: [
          {
            results: { message },
            artifacts: { message: text, sender: 'Machine', sender_name: 'AI', files: [], type: 'object' },
            outputs: { message: { message: text, type: 'text' } },
            logs: { message: [] },
            messages: [
              { message: text, sender: 'Machine', sender_name: 'AI', session_id: sessionId, component_id: 'ChatOutput-mock', files: [], type: 'text' },
            ],
            timedelta: null,
            duration: null,
            component_display_name: 'Chat Output',
            component_id: 'ChatOutput-mock',
            used_frozen_result: false,
          },
        ],
      },
    ],
  };
}

// ---------------------------------------------------------------------------
// OpenAI

function openai(res: http.ServerResponse, record: ProviderMockRequest): Promise<void> | void {
  const body = record.body;
  const invalid = (message: string) => sendJson(res, 400, { error: { message, type: 'invalid_request_error', param: null, code: null } });
  if (!isRecord(body) || typeof body.model !== 'string' || body.model === '') return invalid('you must provide a model parameter');
  if (!Array.isArray(body.messages) || body.messages.length === 0) return invalid("'messages' must be a non-empty array");
  for (const m of body.messages) {
    if (!isRecord(m) || !['system', 'user', 'assistant'].includes(m.role as string) || typeof m.content !== 'string')
      return invalid('invalid message in messages');
  }
  if (body.temperature !== undefined && typeof body.temperature !== 'number') return invalid("'temperature' must be a number");

  const lastUser = [...(body.messages as Array<{ role: string; content: string }>)].reverse().find((m) => m.role === 'user')?.content ?? '';
  const text = echoText(lastUser);
  const promptTokens = (body.messages as Array<{ content: string }>).reduce((sum, m) => sum + wordCount(m.content) + 4, 0);
  const usage = { prompt_tokens: promptTokens, completion_tokens: splitWords(text).length, total_tokens: promptTokens + splitWords(text).length };
  const id = 'chatcmpl-mock';
  const created = 1_700_000_000;
  if (body.stream !== true) {
    return sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage,
      system_fingerprint: 'fp_mock',
    });
  }
  const base = { id, object: 'chat.completion.chunk', created, model: body.model, system_fingerprint: 'fp_mock' };
  const events: unknown[] = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }] },
  ];
  for (const piece of splitWords(text)) events.push({ ...base, choices: [{ index: 0, delta: { content: piece }, logprobs: null, finish_reason: null }] });
  events.push({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] });
  const includeUsage = isRecord(body.stream_options) && body.stream_options.include_usage === true;
  if (includeUsage) events.push({ ...base, choices: [], usage });
  return streamChunks(res, 'text/event-stream; charset=utf-8', [...events.map((e) => `data: ${JSON.stringify(e)}\n\n`), 'data: [DONE]\n\n']);
}

// ---------------------------------------------------------------------------
// Anthropic

function anthropic(res: http.ServerResponse, record: ProviderMockRequest): Promise<void> | void {
  const invalid = (message: string) => sendJson(res, 400, { type: 'error', error: { type: 'invalid_request_error', message } });
  if (record.headers['anthropic-version'] === undefined) return invalid('anthropic-version: header is required');
  const body = record.body;
  if (!isRecord(body) || typeof body.model !== 'string' || body.model === '') return invalid('model: Field required');
  if (!Number.isInteger(body.max_tokens)) return invalid('max_tokens: Field required');
  if (!Array.isArray(body.messages) || body.messages.length === 0) return invalid('messages: at least one message is required');
  let expected = 'user';
  for (const m of body.messages) {
    if (!isRecord(m) || typeof m.content !== 'string' || m.content === '') return invalid('messages: text content blocks must be non-empty');
    if (m.role !== expected) return invalid('messages: roles must alternate between "user" and "assistant", starting with "user"');
    expected = expected === 'user' ? 'assistant' : 'user';
  }
  if (body.system !== undefined && typeof body.system !== 'string') return invalid('system: Input should be a valid string');

  const messages = body.messages as Array<{ role: string; content: string }>;
  const last = messages[messages.length - 1];
  if (last?.role !== 'user') return invalid('the last message must be a user message');
  const text = echoText(last.content);
  const inputTokens = messages.reduce((sum, m) => sum + wordCount(m.content), 0) + (typeof body.system === 'string' ? wordCount(body.system) : 0);
  const outputTokens = splitWords(text).length;
  const id = 'msg_mock';
  if (body.stream !== true) {
    return sendJson(res, 200, {
      id,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: inputTokens, output_tokens: outputTokens },
    });
  }
  const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  const chunks = [
    sse('message_start', {
      type: 'message_start',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        content: [],
        model: body.model,
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: inputTokens, output_tokens: 1 },
      },
    }),
    sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    sse('ping', { type: 'ping' }),
    ...splitWords(text).map((piece) => sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: piece } })),
    sse('content_block_stop', { type: 'content_block_stop', index: 0 }),
    sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: outputTokens } }),
    sse('message_stop', { type: 'message_stop' }),
  ];
  return streamChunks(res, 'text/event-stream; charset=utf-8', chunks);
}

// ---------------------------------------------------------------------------
// Gemini

function gemini(res: http.ServerResponse, record: ProviderMockRequest): Promise<void> | void {
  const invalid = (message: string) => sendJson(res, 400, { error: { code: 400, message, status: 'INVALID_ARGUMENT' } });
  const body = record.body;
  if (!isRecord(body) || !Array.isArray(body.contents) || body.contents.length === 0)
    return invalid('* GenerateContentRequest.contents: contents is not specified');
  for (const c of body.contents) {
    if (
      !isRecord(c) ||
      !['user', 'model'].includes(c.role as string) ||
      !Array.isArray(c.parts) ||
      !c.parts.every((p: unknown) => isRecord(p) && typeof p.text === 'string')
    ) {
      return invalid('* GenerateContentRequest.contents: invalid content');
    }
  }
  const contents = body.contents as Array<{ role: string; parts: Array<{ text: string }> }>;
  const last = contents[contents.length - 1];
  if (last?.role !== 'user') return invalid('Please ensure that the last turn is a user turn.');
  const match = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(record.path);
  const model = match?.[1] ?? 'gemini';
  const text = echoText(last.parts.map((p) => p.text).join(''));
  const promptTokenCount = contents.reduce((sum, c) => sum + c.parts.reduce((s, p) => s + wordCount(p.text), 0), 0);
  const candidatesTokenCount = splitWords(text).length;
  const usageMetadata = { promptTokenCount, candidatesTokenCount, totalTokenCount: promptTokenCount + candidatesTokenCount };
  const complete = {
    candidates: [{ content: { parts: [{ text }], role: 'model' }, finishReason: 'STOP', index: 0 }],
    usageMetadata,
    modelVersion: model,
    responseId: 'mock-response',
  };
  if (match?.[2] === 'generateContent') return sendJson(res, 200, complete);

  const pieces = splitWords(text);
  const events = pieces.map((piece, i) => ({
    candidates: [{ content: { parts: [{ text: piece }], role: 'model' }, ...(i === pieces.length - 1 ? { finishReason: 'STOP' } : {}), index: 0 }],
    usageMetadata: i === pieces.length - 1 ? usageMetadata : { promptTokenCount, totalTokenCount: promptTokenCount },
    modelVersion: model,
    responseId: 'mock-response',
  }));
  if (record.query.alt === 'sse') {
    return streamChunks(
      res,
      'text/event-stream',
      events.map((e) => `data: ${JSON.stringify(e)}\r\n\r\n`),
    );
  }
  // Without alt=sse the real API streams one JSON array.
  return sendJson(res, 200, events);
}

// ---------------------------------------------------------------------------
// Generic

function generic(res: http.ServerResponse, record: ProviderMockRequest): void {
  const body = record.body;
  if (!isRecord(body) || typeof body.message !== 'string') sendJson(res, 400, { error: 'message is required' });
  else sendJson(res, 200, { response: echoText(body.message), session_id: body.session_id ?? null });
}

// ---------------------------------------------------------------------------
// Errors

function receivedKey(record: ProviderMockRequest): string {
  const auth = record.headers['authorization'];
  if (typeof auth === 'string' && auth.startsWith('Bearer ')) return auth.slice(7);
  for (const name of ['x-api-key', 'x-goog-api-key']) {
    const value = record.headers[name];
    if (typeof value === 'string') return value;
  }
  return record.query.api_key ?? record.query.key ?? '';
}

/** Deliberately echoes the whole key, as some upstreams do, so tests can check it is redacted. */
function authError(route: ProviderRoute, key: string): unknown {
  return providerError(route, 401, `Incorrect API key provided: ${key === '' ? '(none)' : key}`);
}

function providerError(route: ProviderRoute, status: number, message: string): unknown {
  switch (route) {
    case 'openai':
      return {
        error: {
          message,
          type: status === 429 ? 'requests' : 'invalid_request_error',
          param: null,
          code: status === 401 ? 'invalid_api_key' : 'rate_limit_exceeded',
        },
      };
    case 'anthropic':
      return { type: 'error', error: { type: status === 401 ? 'authentication_error' : 'rate_limit_error', message } };
    case 'gemini':
      return { error: { code: status, message, status: status === 401 ? 'UNAUTHENTICATED' : 'RESOURCE_EXHAUSTED' } };
    case 'langflow':
      return { detail: message };
    default:
      return { error: message };
  }
}

// ---------------------------------------------------------------------------
// Helpers

/**
 * A server for a test's own scripted endpoint (a model answering as the test needs): `handle` gets each request
 * with its whole body parsed as JSON.
 */
export function jsonRequestServer(handle: (req: http.IncomingMessage, body: any, res: http.ServerResponse) => void): http.Server {
  return http.createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => handle(req, JSON.parse(raw), res));
  });
}

export function sendJson(res: http.ServerResponse, status: number, payload: unknown, headers?: Record<string, string>): void {
  sendRaw(res, status, 'application/json', JSON.stringify(payload), headers);
}

function sendRaw(res: http.ServerResponse, status: number, contentType: string, text: string, headers?: Record<string, string>): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': String(Buffer.byteLength(text)), ...(headers ?? {}) });
  res.end(text);
}

async function streamChunks(res: http.ServerResponse, contentType: string, chunks: string[]): Promise<void> {
  res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache' });
  res.flushHeaders();
  for (const chunk of chunks) {
    if (res.destroyed) return;
    res.write(chunk);
    await sleep(2, res);
  }
  if (!res.destroyed) res.end();
}

/** Resolves after ms, or as soon as the client goes away. */
export function sleep(ms: number, res: http.ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      res.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    res.on('close', done);
  });
}

/** Words with their trailing whitespace, so the pieces concatenate back to the text. */
export function splitWords(text: string): string[] {
  const pieces = text.match(/\S+\s*|\s+/g) ?? [];
  return pieces.length > 0 ? pieces : [text];
}

function wordCount(text: string): number {
  return text.split(/\s+/).filter((w) => w !== '').length;
}

function isRecord(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
