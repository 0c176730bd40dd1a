/**
 * OpenAI-compatible chat completions (OpenAI, Azure-style proxies, Ollama,
 * vLLM, LM Studio, ...) over the SSRF-guarded outbound client.
 *
 * Every failure surfaces as a ChatProviderError with a closed `kind`, so
 * callers can map it to an answer for the visitor without inspecting
 * provider-specific bodies. Upstream bodies are only quoted as a short,
 * tag-stripped excerpt; the API key never appears in messages.
 */
import type { Readable } from 'node:stream';
import { countTokens } from 'gpt-tokenizer';
import { OutboundError, type GuardedHttpClient } from '../http/guarded-client.ts';
import { SseParser, type SseEvent } from './sse.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface ChatRequest {
  baseUrl: string;
  apiKey?: string;
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  maxTokens?: number;
  /** Whole exchange, connect to last byte (streams included). Defaults: 60 s, 5 min for streams. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export type ChatProviderErrorKind = 'auth' | 'rate_limited' | 'upstream' | 'invalid_response' | 'connection_failed' | 'timeout';

export class ChatProviderError extends Error {
  constructor(
    readonly kind: ChatProviderErrorKind,
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ChatProviderError';
  }
}

export interface ChatCompletion {
  text: string;
  usage: ChatUsage;
  /** false when the provider sent no usage and the counts come from gpt-tokenizer. */
  usageReported: boolean;
  /** The model the provider says answered, else the requested one. */
  model: string;
}

export type ChatStreamEvent =
  | { type: 'delta'; text: string }
  | { type: 'done'; text: string; usage: ChatUsage; usageReported: boolean };

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_STREAM_TIMEOUT_MS = 5 * 60_000;
const EXCERPT_MAX_CHARS = 200;
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
  let response;
  try {
    response = await http.request(chatCompletionsUrl(req.baseUrl), {
      method: 'POST',
      headers: requestHeaders(req, 'application/json'),
      body: JSON.stringify(requestBody(req, false)),
      timeoutMs: req.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(req.signal ? { signal: req.signal } : {}),
    });
  } catch (err) {
    throw toChatError(err);
  }
  const bodyText = response.text();
  if (response.status < 200 || response.status > 299) throw httpError(response.status, bodyText);

  const parsed = parseJson(bodyText);
  if (parsed === undefined) throw invalidResponse('the language-model provider returned a response that is not valid JSON');
  const providerError = embeddedError(parsed);
  if (providerError !== null) throw providerError;
  const text = messageText(parsed);
  if (text === null) throw invalidResponse('the language-model provider returned no message content');
  const { usage, usageReported } = resolveUsage(readUsage(parsed), req.messages, text);
  const model = readString(parsed, 'model') ?? req.model;
  return { text, usage, usageReported, model };
}

export async function* streamChatCompletion(http: GuardedHttpClient, req: ChatRequest): AsyncGenerator<ChatStreamEvent> {
  let opened: { status: number; headers: Record<string, string | string[] | undefined>; body: Readable };
  try {
    opened = await http.stream(chatCompletionsUrl(req.baseUrl), {
      method: 'POST',
      headers: requestHeaders(req, 'text/event-stream'),
      body: JSON.stringify(requestBody(req, true)),
      timeoutMs: req.timeoutMs ?? DEFAULT_STREAM_TIMEOUT_MS,
      ...(req.signal ? { signal: req.signal } : {}),
    });
  } catch (err) {
    throw toChatError(err);
  }
  const body = opened.body;
  try {
    if (opened.status < 200 || opened.status > 299) {
      throw httpError(opened.status, await readCapped(body, ERROR_BODY_MAX_BYTES));
    }

    // A provider ignoring `stream: true` answers with one JSON document.
    const contentType = String(opened.headers['content-type'] ?? '').toLowerCase();
    if (contentType.includes('json') && !contentType.includes('event-stream')) {
      const parsed = parseJson(await readCapped(body, Number.POSITIVE_INFINITY));
      if (parsed === undefined) throw invalidResponse('the language-model provider returned a response that is not valid JSON');
      const providerError = embeddedError(parsed);
      if (providerError !== null) throw providerError;
      const text = messageText(parsed);
      if (text === null) throw invalidResponse('the language-model provider returned no message content');
      if (text !== '') yield { type: 'delta', text };
      yield { type: 'done', text, ...resolveUsage(readUsage(parsed), req.messages, text) };
      return;
    }

    const parser = new SseParser();
    let text = '';
    let reported: ChatUsage | null = null;
    let sawChunk = false;
    let finished = false;

    const handle = (event: SseEvent): string | null => {
      const data = event.data.trim();
      if (data === '[DONE]') {
        finished = true;
        return null;
      }
      if (data === '') return null;
      const parsed = parseJson(data);
      if (parsed === undefined) throw invalidResponse('the language-model provider sent a stream event that is not valid JSON');
      const providerError = embeddedError(parsed);
      if (providerError !== null) throw providerError;
      sawChunk = true;
      reported = readUsage(parsed) ?? reported;
      const choice = firstChoice(parsed);
      const content = choice === null ? undefined : readPath(choice, ['delta', 'content']) ?? readPath(choice, ['message', 'content']);
      return typeof content === 'string' && content !== '' ? content : null;
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
    yield { type: 'done', text, ...resolveUsage(reported, req.messages, text) };
  } catch (err) {
    throw toChatError(err);
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
    messages: req.messages.map((m) => ({ role: m.role, content: m.content })),
  };
  if (req.temperature !== undefined) body['temperature'] = req.temperature;
  if (req.maxTokens !== undefined) body['max_tokens'] = req.maxTokens;
  if (stream) {
    body['stream'] = true;
    body['stream_options'] = { include_usage: true };
  }
  return body;
}

function toChatError(err: unknown): ChatProviderError {
  if (err instanceof ChatProviderError) return err;
  if (err instanceof OutboundError) {
    if (err.kind === 'timeout') return new ChatProviderError('timeout', `the language-model provider did not answer in time (${err.message})`);
    return new ChatProviderError('connection_failed', err.message);
  }
  const message = err instanceof Error && err.message !== '' ? err.message : 'network error';
  return new ChatProviderError('connection_failed', `the connection to the language-model provider failed (${message})`);
}

function httpError(status: number, bodyText: string): ChatProviderError {
  if (status === 401 || status === 403) return new ChatProviderError('auth', 'the language-model provider rejected the API key', status);
  const excerpt = errorExcerpt(bodyText);
  const suffix = excerpt === '' ? '' : `: ${excerpt}`;
  if (status === 429) return new ChatProviderError('rate_limited', `the language-model provider is rate limiting requests${suffix}`, status);
  return new ChatProviderError('upstream', `the language-model provider answered HTTP ${status}${suffix}`, status);
}

function invalidResponse(message: string): ChatProviderError {
  return new ChatProviderError('invalid_response', message);
}

/** A provider error carried in a 2xx body or an SSE event: `{"error": {...}}`. */
function embeddedError(parsed: unknown): ChatProviderError | null {
  if (!isRecord(parsed) || !('error' in parsed) || parsed['error'] === null || parsed['error'] === undefined) return null;
  if ('choices' in parsed) return null;
  const error = parsed['error'];
  const raw = typeof error === 'string' ? error : isRecord(error) && typeof error['message'] === 'string' ? error['message'] : 'unknown error';
  const excerpt = excerptOf(raw);
  return new ChatProviderError('upstream', `the language-model provider reported an error: ${excerpt === '' ? 'unknown error' : excerpt}`);
}

/** Short, single-line, tag-free text for an error message: a JSON error's message when there is one, else the body. */
export function errorExcerpt(bodyText: string): string {
  const parsed = parseJson(bodyText);
  if (isRecord(parsed)) {
    const error = parsed['error'];
    if (typeof error === 'string') return excerptOf(error);
    if (isRecord(error) && typeof error['message'] === 'string') return excerptOf(error['message']);
    if (typeof parsed['message'] === 'string') return excerptOf(parsed['message']);
    if (typeof parsed['detail'] === 'string') return excerptOf(parsed['detail']);
  }
  return excerptOf(bodyText);
}

function excerptOf(text: string): string {
  const stripped = text
    .slice(0, 20_000)
    .replace(/<(script|style|head)\b[^>]*>[\s\S]*?<\/\1\s*>/gi, ' ')
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/<\/?[a-zA-Z!][^>]*>/g, ' ')
    .replace(/&nbsp;/gi, ' ')
    .replace(/&lt;/gi, '<')
    .replace(/&gt;/gi, '>')
    .replace(/&quot;/gi, '"')
    .replace(/&#39;|&apos;/gi, "'")
    .replace(/&amp;/gi, '&')
    // Control characters would let an upstream forge log lines.
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (stripped.length <= EXCERPT_MAX_CHARS) return stripped;
  return `${stripped.slice(0, EXCERPT_MAX_CHARS - 1).trimEnd()}…`;
}

/** Reads a stream as UTF-8 text, stopping once `maxBytes` have arrived. */
export async function readCapped(body: Readable, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= maxBytes) break;
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readPath(value: unknown, path: string[]): unknown {
  let current = value;
  for (const key of path) {
    if (!isRecord(current)) return undefined;
    current = current[key];
  }
  return current;
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

function readUsage(parsed: unknown): ChatUsage | null {
  const usage = readPath(parsed, ['usage']);
  if (!isRecord(usage)) return null;
  const prompt = usage['prompt_tokens'];
  const completion = usage['completion_tokens'];
  if (!isCount(prompt) || !isCount(completion)) return null;
  const total = usage['total_tokens'];
  return { promptTokens: prompt, completionTokens: completion, totalTokens: isCount(total) ? total : prompt + completion };
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}

function resolveUsage(reported: ChatUsage | null, messages: ChatMessage[], text: string): { usage: ChatUsage; usageReported: boolean } {
  if (reported !== null) return { usage: reported, usageReported: true };
  const promptTokens = messages.reduce((sum, m) => sum + tokens(m.content), 0);
  const completionTokens = tokens(text);
  return { usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens }, usageReported: false };
}

/** Counts user-controlled text: special-token markers are counted as plain text instead of throwing. */
function tokens(text: string): number {
  return text === '' ? 0 : countTokens(text, { disallowedSpecial: new Set() });
}
