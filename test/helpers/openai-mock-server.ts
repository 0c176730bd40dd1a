/**
 * A local stand-in for an OpenAI-compatible provider, for tests.
 *
 *   const mock = await startMockOpenAi();
 *   const http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${mock.port}`] });
 *   // baseUrl: mock.url  (or `${mock.url}/v1`)
 *   mock.setReply((body, path) => ({ status: 500, rawBody: '<h1>boom</h1>' }));
 *   await mock.close();
 *
 * Routes (POST; any path ending in them, so base URLs with a prefix work):
 *  - /v1/chat/completions: JSON, or SSE when body.stream is true (the text in
 *    word chunks as `data: {"choices":[{"delta":{"content":...}}]}` lines, a
 *    usage chunk when stream_options.include_usage, then `data: [DONE]`);
 *  - /v1/embeddings: deterministic unit vectors from a hash of each input
 *    (16 dimensions, or body.dimensions), with usage.
 * The default chat reply is deterministic and quotes the last user message.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sendJson, sleep, splitWords } from './provider-mock-servers.ts';

export interface MockRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON, or the raw text when the body is not JSON. */
  body: any;
  /** Set when the client closed the connection before the response was complete (e.g. an aborted stream). */
  aborted: boolean;
}

export interface MockOpenAi {
  /** http://127.0.0.1:<port> (no '/v1'). */
  url: string;
  port: number;
  requests: MockRequest[];
  /** Decides the reply of every following request; `{}` means the default. `path` is the request path. */
  setReply(fn: (body: any, path: string) => MockReply): void;
  close(): Promise<void>;
}

export type MockReply = {
  status?: number;
  /** Chat: the answer text (default: deterministic, quoting the last user message). */
  text?: string;
  /** Chat/embeddings: usage to report; null reports none; undefined computes a default. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  /** Sent verbatim instead of the generated body (any status, streaming or not). */
  rawBody?: string;
  /** Sent verbatim as separate writes, `chunkDelayMs` apart (SSE framing tests). Wins over rawBody. */
  rawChunks?: string[];
  /** Delay before the response head is sent. */
  delayMs?: number;
  /** Delay between SSE chunks (default 5 ms). */
  chunkDelayMs?: number;
  headers?: Record<string, string>;
};

export function defaultMockAnswer(body: any): string {
  const messages: unknown = body?.messages;
  let lastUser = '';
  if (Array.isArray(messages)) {
    for (const m of messages) {
      if (m && typeof m === 'object' && m.role === 'user' && typeof m.content === 'string') lastUser = m.content;
    }
  }
  return `This is a mock answer to "${lastUser}". It is deterministic.`;
}

/** The vector the mock returns for one input (unit length). */
export function mockEmbedding(input: string, dimensions = 16): number[] {
  const values: number[] = [];
  for (let block = 0; values.length < dimensions; block += 1) {
    const digest = createHash('sha256').update(`${block}:${input}`).digest();
    for (let i = 0; i + 1 < digest.length && values.length < dimensions; i += 2) {
      values.push(digest.readUInt16BE(i) / 32767.5 - 1);
    }
  }
  const norm = Math.sqrt(values.reduce((sum, v) => sum + v * v, 0)) || 1;
  return values.map((v) => v / norm);
}

export async function startMockOpenAi(): Promise<MockOpenAi> {
  const requests: MockRequest[] = [];
  let replyFn: (body: any, path: string) => MockReply = () => ({});

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
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      const record: MockRequest = { path, headers: { ...req.headers }, body, aborted: false };
      requests.push(record);
      res.on('close', () => {
        if (!res.writableFinished) record.aborted = true;
      });
      void respond(req, res, path, body, record).catch(() => res.destroy());
    });
  });

  async function respond(req: http.IncomingMessage, res: http.ServerResponse, path: string, body: any, record: MockRequest): Promise<void> {
    const isChat = /\/chat\/completions$/.test(path);
    const isEmbeddings = /\/embeddings$/.test(path);
    if (req.method !== 'POST' || (!isChat && !isEmbeddings)) {
      sendJson(res, req.method !== 'POST' ? 405 : 404, { error: { message: `no route for ${req.method} ${path}`, type: 'invalid_request_error' } });
      return;
    }
    const reply = replyFn(body, path) ?? {};
    if (reply.delayMs !== undefined && reply.delayMs > 0) {
      await sleep(reply.delayMs, res);
      if (record.aborted || res.destroyed) return;
    }
    const status = reply.status ?? 200;
    const stream = isChat && body?.stream === true;
    const chunkDelay = reply.chunkDelayMs ?? 5;

    if (reply.rawChunks !== undefined || reply.rawBody !== undefined) {
      const contentType = stream && status < 300 ? 'text/event-stream' : 'application/json';
      res.writeHead(status, { 'content-type': contentType, ...(reply.headers ?? {}) });
      for (const piece of reply.rawChunks ?? [reply.rawBody ?? '']) {
        if (record.aborted || res.destroyed) return;
        res.write(piece);
        if (reply.rawChunks !== undefined) await sleep(chunkDelay, res);
      }
      res.end();
      return;
    }

    if (status < 200 || status > 299) {
      sendJson(res, status, { error: { message: `mock error ${status}`, type: 'mock_error' } }, reply.headers);
      return;
    }

    if (isEmbeddings) {
      const inputs: unknown[] = Array.isArray(body?.input) ? body.input : [body?.input ?? ''];
      const dims = Number.isInteger(body?.dimensions) && body.dimensions > 0 ? (body.dimensions as number) : 16;
      const texts = inputs.map((input) => (typeof input === 'string' ? input : JSON.stringify(input)));
      const promptTokens = texts.reduce((sum, t) => sum + wordCount(t), 0);
      const usage =
        reply.usage === null
          ? undefined
          : reply.usage === undefined
            ? { prompt_tokens: promptTokens, total_tokens: promptTokens }
            : { ...reply.usage, total_tokens: reply.usage.prompt_tokens };
      sendJson(
        res,
        200,
        {
          object: 'list',
          data: texts.map((t, index) => ({ object: 'embedding', index, embedding: mockEmbedding(t, dims) })),
          model: typeof body?.model === 'string' ? body.model : 'mock-embedding',
          ...(usage ? { usage } : {}),
        },
        reply.headers,
      );
      return;
    }

    const text = reply.text ?? defaultMockAnswer(body);
    const model = typeof body?.model === 'string' ? body.model : 'mock-model';
    const usage = reply.usage === null ? null : withTotal(reply.usage ?? defaultUsage(body, text));
    const id = `chatcmpl-mock-${requests.length}`;
    const created = Math.floor(Date.now() / 1000);

    if (!stream) {
      sendJson(
        res,
        200,
        {
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
          ...(usage ? { usage } : {}),
        },
        reply.headers,
      );
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...(reply.headers ?? {}) });
    res.flushHeaders();
    const base = { id, object: 'chat.completion.chunk', created, model };
    const events: unknown[] = [{ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }];
    for (const piece of splitWords(text)) events.push({ ...base, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
    events.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    if (body?.stream_options?.include_usage === true && usage) events.push({ ...base, choices: [], usage });
    for (const event of events) {
      if (record.aborted || res.destroyed) return;
      res.write(`data: ${JSON.stringify(event)}\n\n`);
      await sleep(chunkDelay, res);
    }
    if (record.aborted || res.destroyed) return;
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    setReply(fn) {
      replyFn = fn;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function wordCount(text: string): number {
  return text.split(/\s+/).filter((w) => w !== '').length;
}

function defaultUsage(body: any, text: string): { prompt_tokens: number; completion_tokens: number } {
  const messages: unknown[] = Array.isArray(body?.messages) ? body.messages : [];
  const prompt = messages.reduce<number>((sum, m: any) => sum + (typeof m?.content === 'string' ? wordCount(m.content) : 0) + 4, 0);
  return { prompt_tokens: prompt, completion_tokens: wordCount(text) };
}

function withTotal(usage: { prompt_tokens: number; completion_tokens: number }) {
  return { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
}
