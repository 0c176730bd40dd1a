/**
 * OpenAI-compatible chat completions (OpenAI, Azure-style proxies, Ollama,
 * vLLM, LM Studio, ...) over the SSRF-guarded outbound client.
 *
 * Every failure is an AiUpstreamError (source 'language_model'), so callers
 * map it like any other AI upstream's. Upstream bodies are only quoted as the
 * core's short, tag-stripped, key-free excerpt.
 */
import type { Readable } from 'node:stream';
import type { GuardedHttpClient } from '../http/guarded-client.ts';
import { countTokens } from '../text/tokens.ts';
import {
  parseJson,
  readCapped,
  readOpenAiUsage,
  readPath,
  redactKey,
  redactReply,
  requestSecrets,
  createReplyRedactor,
  upstreamExcerpt,
  type AiUsage,
} from './core/response.ts';
import { OPENAI_STREAM_DONE, openAiReportedError, readOpenAiStreamChunk } from './core/openai-stream.ts';
import { invalidResponse as coreInvalidResponse, statusError, transportError } from './core/upstream-error.ts';
import { SseParser, type SseEvent } from './sse.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** An assistant turn that called tools (native tool calling). */
  toolCalls?: ModelToolCall[];
  /** A tool turn: the call it answers. */
  toolCallId?: string;
}

/** A function the model may call, described by a JSON Schema (OpenAI's `tools` of type `function`). */
export interface ModelTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** A call the model asked for; `arguments` is the JSON text the model wrote (it may not parse). */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface ChatRequest {
  baseUrl: string;
  apiKey?: string;
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  maxTokens?: number;
  /** Functions offered to the model; its reply may then be calls instead of (or beside) text. */
  tools?: ModelTool[];
  /** Whole exchange, connect to last byte (streams included). Defaults: 60 s, 5 min for streams. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface ChatCompletion {
  text: string;
  usage: AiUsage;
  /** false when the provider sent no usage and the counts come from gpt-tokenizer. */
  usageReported: boolean;
  /** The model the provider says answered, else the requested one. */
  model: string;
  /** The tool calls of the reply (empty when it is only text). */
  toolCalls: ModelToolCall[];
}

export type ChatStreamEvent = { type: 'delta'; text: string } | { type: 'done'; text: string; usage: AiUsage; usageReported: boolean };

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_STREAM_TIMEOUT_MS = 5 * 60_000;
/** Enough of an error body for an excerpt; the rest is not read. */
const ERROR_BODY_MAX_BYTES = 64 * 1024;

/**
 * {baseUrl}/v1/chat/completions. A base already ending in '/v1' is not
 * doubled, and a full '/chat/completions' URL is used as is. Query strings
 * (e.g. Azure's api-version) are kept.
 */
export function chatCompletionsUrl(baseUrl: string): string {
  const trimmed = baseUrl.trim();
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    // The guarded client reports the invalid URL.
    return trimmed;
  }
  const path = url.pathname.replace(/\/+$/, '');
  if (/\/chat\/completions$/i.test(path)) url.pathname = path;
  else if (/\/v1$/i.test(path)) url.pathname = `${path}/chat/completions`;
  else url.pathname = `${path}/v1/chat/completions`;
  return url.toString();
}

export async function createChatCompletion(http: GuardedHttpClient, req: ChatRequest): Promise<ChatCompletion> {
  const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let response;
  try {
    response = await http.request(chatCompletionsUrl(req.baseUrl), {
      method: 'POST',
      headers: requestHeaders(req, 'application/json'),
      body: JSON.stringify(requestBody(req, false)),
      timeoutMs,
      ...(req.signal ? { signal: req.signal } : {}),
    });
  } catch (err) {
    throw transportError('language_model', err, timeoutMs, redacter(req));
  }
  const bodyText = response.text();
  if (response.status < 200 || response.status > 299) throw httpError(req, response.status, response.headers, bodyText);

  const parsed = completeReply(req, bodyText);
  const text = parsed.text;
  const { usage, usageReported } = resolveUsage(readOpenAiUsage(parsed.json), req.messages, text);
  const model = readString(parsed.json, 'model') ?? req.model;
  return { text, usage, usageReported, model, toolCalls: parsed.toolCalls };
}

export async function* streamChatCompletion(http: GuardedHttpClient, req: ChatRequest): AsyncGenerator<ChatStreamEvent> {
  const timeoutMs = req.timeoutMs ?? DEFAULT_STREAM_TIMEOUT_MS;
  let opened: { status: number; headers: Record<string, string | string[] | undefined>; body: Readable };
  try {
    opened = await http.stream(chatCompletionsUrl(req.baseUrl), {
      method: 'POST',
      headers: requestHeaders(req, 'text/event-stream'),
      body: JSON.stringify(requestBody(req, true)),
      timeoutMs,
      ...(req.signal ? { signal: req.signal } : {}),
    });
  } catch (err) {
    throw transportError('language_model', err, timeoutMs, redacter(req));
  }
  const body = opened.body;
  try {
    if (opened.status < 200 || opened.status > 299) {
      throw httpError(req, opened.status, opened.headers, await readCapped(body, ERROR_BODY_MAX_BYTES));
    }

    // A provider ignoring `stream: true` answers with one JSON document.
    const contentType = String(opened.headers['content-type'] ?? '').toLowerCase();
    if (contentType.includes('json') && !contentType.includes('event-stream')) {
      const { json, text } = completeReply(req, await readCapped(body, Number.POSITIVE_INFINITY));
      if (text !== '') yield { type: 'delta', text };
      yield { type: 'done', text, ...resolveUsage(readOpenAiUsage(json), req.messages, text) };
      return;
    }

    const parser = new SseParser();
    // Deltas go through the redactor, which holds back only an end that may begin a secret.
    const redactor = createReplyRedactor(secretsOf(req));
    const excerpt = excerpter(req);
    let text = '';
    let reported: AiUsage | null = null;
    let sawChunk = false;
    let finished = false;

    const handle = (event: SseEvent): string | null => {
      const data = event.data.trim();
      if (data === '') return null;
      const parsed = data === OPENAI_STREAM_DONE ? data : parseJson(data);
      if (parsed === undefined) throw invalidResponse('the language-model provider sent a stream event that is not JSON');
      const chunk = readOpenAiStreamChunk(parsed, 'language_model', excerpt);
      if (chunk.kind === 'done') {
        finished = true;
        return null;
      }
      // Any JSON event, an object or not, shows a provider that answers: only a stream without one is invalid.
      sawChunk = true;
      if (chunk.kind === 'other') return null;
      reported = chunk.usage ?? reported;
      if (chunk.text === null) return null;
      const visible = redactor.push(chunk.text);
      return visible === '' ? null : visible;
    };

    for await (const chunk of body as AsyncIterable<Buffer>) {
      for (const event of parser.push(chunk)) {
        const delta = handle(event);
        if (delta !== null) {
          text += delta;
          yield { type: 'delta', text: delta };
        }
        if (finished) break;
      }
      if (finished) break;
    }
    if (!finished) {
      for (const event of parser.end()) {
        const delta = handle(event);
        if (delta !== null) {
          text += delta;
          yield { type: 'delta', text: delta };
        }
      }
    }
    if (!sawChunk) throw invalidResponse('the language-model provider ended the stream without any completion data');
    const rest = redactor.end();
    if (rest !== '') {
      text += rest;
      yield { type: 'delta', text: rest };
    }
    yield { type: 'done', text, ...resolveUsage(reported, req.messages, text) };
  } catch (err) {
    throw transportError('language_model', err, timeoutMs, redacter(req));
  } finally {
    // Early exit (caller's break/return, abort, error): closing the body tears
    // down the upstream request through the guarded client.
    if (!body.destroyed) body.destroy();
  }
}

// ---------------------------------------------------------------------------
// Internals

function requestHeaders(req: ChatRequest, accept: string): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept };
  if (req.apiKey !== undefined && req.apiKey !== '') headers['authorization'] = `Bearer ${req.apiKey}`;
  return headers;
}

function requestBody(req: ChatRequest, stream: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: req.model,
    messages: req.messages.map((m) =>
      m.role === 'tool'
        ? { role: 'tool', tool_call_id: m.toolCallId, content: m.content }
        : m.toolCalls?.length
          ? {
              role: m.role,
              content: m.content || null,
              tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
            }
          : { role: m.role, content: m.content },
    ),
  };
  if (req.tools?.length) {
    body['tools'] = req.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
  }
  if (req.temperature !== undefined) body['temperature'] = req.temperature;
  if (req.maxTokens !== undefined) body['max_tokens'] = req.maxTokens;
  if (stream) {
    body['stream'] = true;
    body['stream_options'] = { include_usage: true };
  }
  return body;
}

/** The key and the credentials in the base URL: no error, excerpt or reply carries them. */
const secretsOf = (req: ChatRequest) => requestSecrets(req.apiKey, req.baseUrl);

const redacter =
  (req: ChatRequest) =>
  (text: string): string =>
    redactKey(text, secretsOf(req));

const excerpter =
  (req: ChatRequest) =>
  (text: string): string =>
    upstreamExcerpt(text, secretsOf(req));

function httpError(req: ChatRequest, status: number, headers: Record<string, string | string[] | undefined>, bodyText: string) {
  const retryAfter = headers['retry-after'];
  return statusError('language_model', status, upstreamExcerpt(bodyText, secretsOf(req)), Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
}

function invalidResponse(reason: string, detail?: string) {
  return coreInvalidResponse('language_model', reason, detail);
}

/** A whole (non-streamed) reply: its JSON and message text, or the failure it is. */
function completeReply(req: ChatRequest, bodyText: string): { json: unknown; text: string; toolCalls: ModelToolCall[] } {
  const json = parseJson(bodyText);
  if (json === undefined) throw invalidResponse('the language-model provider did not return JSON', upstreamExcerpt(bodyText, secretsOf(req)));
  const providerError = openAiReportedError(json, 'language_model', excerpter(req));
  if (providerError !== null) throw providerError;
  const toolCalls = req.tools?.length ? messageToolCalls(json) : [];
  const text = messageText(json) ?? (toolCalls.length > 0 ? '' : null);
  if (text === null) throw invalidResponse('the language-model provider returned no message content');
  // A provider that echoes its key (a debugging proxy, a model repeating its prompt) must not hand it to the visitor.
  return { json, text: redactReply(text, secretsOf(req)), toolCalls };
}

/** choices[0].message.tool_calls, the well-formed ones (a function name and its argument text). */
function messageToolCalls(parsed: unknown): ModelToolCall[] {
  const calls = readPath(firstChoice(parsed), ['message', 'tool_calls']);
  if (!Array.isArray(calls)) return [];
  return calls.flatMap((call, index) => {
    const name = readPath(call, ['function', 'name']);
    const args = readPath(call, ['function', 'arguments']);
    const id = readPath(call, ['id']);
    if (typeof name !== 'string' || name === '') return [];
    return [{ id: typeof id === 'string' && id !== '' ? id : `call_${index}`, name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) }];
  });
}

function readString(value: unknown, key: string): string | undefined {
  const v = readPath(value, [key]);
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function firstChoice(parsed: unknown): unknown {
  const choices = readPath(parsed, ['choices']);
  return Array.isArray(choices) && choices.length > 0 ? (choices[0] as unknown) : null;
}

/** choices[0].message.content; a refusal counts as the text. null when absent. */
function messageText(parsed: unknown): string | null {
  const choice = firstChoice(parsed);
  if (choice === null) return null;
  const content = readPath(choice, ['message', 'content']);
  if (typeof content === 'string') return content;
  // Some providers return content parts: [{type: 'text', text}].
  if (Array.isArray(content)) {
    const parts = content.map((part) => (typeof part === 'string' ? part : readPath(part, ['text'])));
    if (parts.every((p): p is string => typeof p === 'string')) return parts.join('');
  }
  const refusal = readPath(choice, ['message', 'refusal']);
  return typeof refusal === 'string' ? refusal : null;
}

function resolveUsage(reported: AiUsage | null, messages: ChatMessage[], text: string): { usage: AiUsage; usageReported: boolean } {
  if (reported !== null) return { usage: reported, usageReported: true };
  const promptTokens = messages.reduce((sum, m) => sum + countTokens(m.content), 0);
  const completionTokens = countTokens(text);
  return { usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens }, usageReported: false };
}
