/**
 * Outbound AI connector: forwards a visitor message to the endpoint the
 * owner configured (flow platform, OpenAI-compatible, Anthropic, Gemini or a
 * generic JSON API) through the SSRF-guarded client, and turns every failure
 * into an AiUpstreamError (source 'endpoint') with a clear message.
 *
 * The API key travels only in request headers (or in an `api_key`/`key`
 * query parameter the owner left empty for it) and is redacted from every
 * error message and upstream excerpt, and from the reply's text, which the
 * visitor reads and the history stores (an upstream may echo it even when it
 * answers 200).
 */
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { GuardedHttpClient } from '../../http/guarded-client.ts';
import { OPENAI_STREAM_DONE } from '../core/openai-stream.ts';
import { createReplyRedactor, readCapped, redactKey, redactReply, requestSecrets, upstreamExcerpt } from '../core/response.ts';
import { statusError, transportError, type AiUpstreamError } from '../core/upstream-error.ts';
import { parseSse } from '../sse.ts';
import { detectEndpointType } from './detect.ts';
import { buildBody, buildHeaders, createStreamHandler, extractReply, invalidResponse, noTextFound } from './formats.ts';
import { ENDPOINT_TYPES, type ConnectorReply, type ConnectorRequest, type ConnectorStreamEvent, type EndpointType } from './types.ts';
import { resolveEndpoint } from './url.ts';
import { JsonTooDeepError, parseUntrustedJson } from '../../../../schema/text-input.ts';

export const DEFAULT_TIMEOUT_MS = 30_000;
/** Enough of an error body for an excerpt; the rest is not read. */
const ERROR_BODY_MAX_BYTES = 64 * 1024;

/** The one outbound request a prepared call makes (streaming or not). */
const requestInit = (call: ReturnType<typeof prepare>, req: ConnectorRequest) => ({
  method: 'POST',
  headers: call.headers,
  body: call.body,
  timeoutMs: call.timeoutMs,
  ...(req.signal ? { signal: req.signal } : {}),
});

export async function callEndpoint(http: GuardedHttpClient, req: ConnectorRequest): Promise<ConnectorReply> {
  const started = performance.now();
  const call = prepare(req, false);
  let response;
  try {
    response = await http.request(call.url, requestInit(call, req));
  } catch (err) {
    throw call.toError(err);
  }
  const bodyText = response.text();
  if (response.status < 200 || response.status > 299) throw call.statusError(response.status, response.headers, bodyText);
  const { text, usage } = call.parseComplete(bodyText);
  return { type: call.type, text, status: response.status, latencyMs: elapsed(started), usage };
}

/**
 * Streams the reply: uses the upstream's own streaming where it has one
 * (OpenAI stream: true; Anthropic stream: true with content_block_delta
 * events; Gemini :streamGenerateContent?alt=sse; Langflow ?stream=true with
 * its token events), else one delta with the whole text. Yields deltas then
 * one 'done'. Leaving the loop early closes the upstream request.
 */
export async function* streamEndpoint(http: GuardedHttpClient, req: ConnectorRequest): AsyncGenerator<ConnectorStreamEvent> {
  const started = performance.now();
  const type = endpointType(req);
  if (type === 'generic') {
    const reply = await callEndpoint(http, { ...req, type });
    if (reply.text !== '') yield { type: 'delta', text: reply.text };
    yield { type: 'done', reply: { ...reply, latencyMs: elapsed(started) } };
    return;
  }

  const call = prepare(req, true);
  let opened: { status: number; headers: Record<string, string | string[] | undefined>; body: Readable };
  try {
    opened = await http.stream(call.url, requestInit(call, req));
  } catch (err) {
    throw call.toError(err);
  }
  const { status, body } = opened;
  try {
    if (status < 200 || status > 299) throw call.statusError(status, opened.headers, await readCapped(body, ERROR_BODY_MAX_BYTES));

    const contentType = String(opened.headers['content-type'] ?? '').toLowerCase();
    const streamed = contentType.includes('event-stream') || (type === 'flow' && contentType.includes('ndjson'));
    if (!streamed) {
      // The upstream answered with one document (no streaming support, or an
      // error page): same parsing and errors as a non-streamed call.
      const { text, usage } = call.parseComplete(await readCapped(body, Number.POSITIVE_INFINITY));
      if (text !== '') yield { type: 'delta', text };
      yield { type: 'done', reply: { type, text, status, latencyMs: elapsed(started), usage } };
      return;
    }

    const handler = createStreamHandler(type, call.excerpt);
    const events = type === 'flow' ? jsonEvents(body) : sseJsonEvents(body);
    // Holds back the end of the text that may be the start of a key split across two events.
    const redactor = call.replyRedactor();
    let text = '';
    for await (const event of events) {
      const delta = handler.handle(event.event, event.data);
      const safe = delta === null ? '' : redactor.push(delta);
      if (safe !== '') {
        text += safe;
        yield { type: 'delta', text: safe };
      }
      if (handler.finished && type !== 'flow') break;
    }
    const rest = redactor.end();
    if (rest !== '') {
      text += rest;
      yield { type: 'delta', text: rest };
    }
    if (text === '') {
      const fallback = handler.fallbackText();
      if (fallback !== null) {
        text = call.redactReply(fallback);
        if (text !== '') yield { type: 'delta', text };
      } else if (!handler.sawData) {
        throw invalidResponse('the stream carried no reply events');
      } else if (type === 'flow') {
        throw noTextFound(type);
      }
    }
    yield { type: 'done', reply: { type, text, status, latencyMs: elapsed(started), usage: handler.usage } };
  } catch (err) {
    throw call.toError(err);
  } finally {
    if (!body.destroyed) body.destroy();
  }
}

// ---------------------------------------------------------------------------
// Internals

interface PreparedCall {
  type: EndpointType;
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  excerpt: (text: string) => string;
  /** The reply's text without the key (a complete reply, or the pieces of a streamed one). */
  redactReply: (text: string) => string;
  replyRedactor(): ReturnType<typeof createReplyRedactor>;
  toError(err: unknown): AiUpstreamError;
  statusError(status: number, headers: Record<string, string | string[] | undefined>, bodyText: string): AiUpstreamError;
  parseComplete(bodyText: string): { text: string; usage: ConnectorReply['usage'] };
}

function endpointType(req: ConnectorRequest): EndpointType {
  if (req.type !== undefined && ENDPOINT_TYPES.includes(req.type)) return req.type;
  return detectEndpointType(req.endpointUrl);
}

function prepare(req: ConnectorRequest, stream: boolean): PreparedCall {
  const type = endpointType(req);
  const apiKey = req.apiKey === undefined || req.apiKey === '' ? undefined : req.apiKey;
  const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const { url, model } = resolveEndpoint(type, req.endpointUrl, apiKey, stream);
  const secrets = requestSecrets(apiKey, url);
  const redact = (text: string): string => redactKey(text, secrets);
  const excerpt = (text: string): string => upstreamExcerpt(text, secrets);

  return {
    type,
    url,
    headers: buildHeaders(type, apiKey, stream),
    body: JSON.stringify(buildBody(type, req, model, stream, hostOf(url))),
    timeoutMs,
    excerpt,
    redactReply: (text) => redactReply(text, secrets),
    replyRedactor: () => createReplyRedactor(secrets),
    toError: (err) => transportError('endpoint', err, timeoutMs, redact),
    statusError: (status, headers, bodyText) => statusError('endpoint', status, excerpt(bodyText), firstHeader(headers['retry-after'])),
    parseComplete(bodyText) {
      let parsed: unknown;
      try {
        parsed = parseUntrustedJson(bodyText);
      } catch (error) {
        if (error instanceof JsonTooDeepError) throw invalidResponse(`the external API returned ${error.message}`);
        throw invalidResponse('the external API did not return JSON', excerpt(bodyText) || undefined);
      }
      const reply = extractReply(type, parsed, excerpt);
      return { ...reply, text: redactReply(reply.text, secrets) };
    },
  };
}

/** SSE events whose data is JSON (or OpenAI's `[DONE]` marker). */
async function* sseJsonEvents(body: Readable): AsyncGenerator<{ event: string; data: unknown }> {
  for await (const event of parseSse(body as AsyncIterable<Buffer>)) {
    const data = event.data.trim();
    if (data === '') continue;
    if (data === OPENAI_STREAM_DONE) {
      yield { event: event.event, data };
      continue;
    }
    let parsed: unknown;
    try {
      parsed = parseUntrustedJson(data);
    } catch {
      throw invalidResponse('the external API sent a stream event that is not JSON');
    }
    yield { event: event.event, data: parsed };
  }
}

/** Longest JSON event we assemble from several lines; beyond it the partial event is dropped. */
const MAX_JSON_EVENT_CHARS = 1024 * 1024;

/**
 * Langflow's stream: JSON objects, one per line or spread over several lines, separated by blank lines.
 * Objects are framed by tracking bracket depth (outside strings) as characters arrive, so each is parsed
 * once: re-parsing the growing text at every line would be quadratic in a hostile upstream's reply.
 */
async function* jsonEvents(body: Readable): AsyncGenerator<{ event: string; data: unknown }> {
  const decoder = new StringDecoder('utf8');
  let buffer = '';
  let pending = '';
  let depth = 0;
  let inString = false;
  let escaped = false;

  const reset = () => {
    pending = '';
    depth = 0;
    inString = false;
    escaped = false;
  };

  function* line(raw: string): Generator<{ event: string; data: unknown }> {
    let text = raw.trim();
    if (text === '') {
      reset();
      return;
    }
    if (depth === 0 && (text.startsWith(':') || /^(event|id|retry):/.test(text))) return;
    if (depth === 0 && text.startsWith('data:')) text = text.slice(5).trim();
    for (let i = 0; i < text.length; i++) {
      const ch = text[i]!;
      if (depth === 0 && ch !== '{' && ch !== '[') continue;
      pending += ch;
      if (inString) {
        if (escaped) escaped = false;
        else if (ch === '\\') escaped = true;
        else if (ch === '"') inString = false;
        continue;
      }
      if (ch === '"') inString = true;
      else if (ch === '{' || ch === '[') depth++;
      else if (ch === '}' || ch === ']') {
        depth--;
        if (depth === 0) {
          const complete = pending;
          reset();
          try {
            yield { event: 'message', data: parseUntrustedJson(complete) };
          } catch {
            // Not JSON after all: skip it.
          }
        }
      }
      if (pending.length > MAX_JSON_EVENT_CHARS) reset();
    }
    if (depth > 0) pending += '\n';
  }

  for await (const chunk of body as AsyncIterable<Buffer>) {
    buffer += decoder.write(chunk);
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop() ?? '';
    for (const raw of lines) yield* line(raw);
  }
  buffer += decoder.end();
  if (buffer !== '') yield* line(buffer);
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return '';
  }
}

function elapsed(started: number): number {
  return Math.max(0, Math.round(performance.now() - started));
}

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
