/**
 * Wire formats of each endpoint type: request headers and body, reply text
 * and usage extraction, and the per-type handling of streamed events.
 */
import { type AiUpstreamError, invalidResponse as coreInvalidResponse, reportedError } from '../core/upstream-error.ts';
import { readOpenAiStreamChunk } from '../core/openai-stream.ts';
import { isCount, isRecord, readOpenAiUsage, readPath, reportedErrorText, usageOf, type AiUsage } from '../core/response.ts';
import type { ConnectorRequest, EndpointType } from './types.ts';

export const ANTHROPIC_VERSION = '2023-06-01';
export const DEFAULT_TEMPERATURE = 0.7;
/** Anthropic requires max_tokens; Gemini gets the same bound (2.5 models spend part of it thinking). */
export const DEFAULT_MAX_TOKENS = 2048;

// ---------------------------------------------------------------------------
// Requests

export function buildHeaders(type: EndpointType, apiKey: string | undefined, stream: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: stream ? 'application/json, text/event-stream' : 'application/json',
  };
  if (type === 'messages') headers['anthropic-version'] = ANTHROPIC_VERSION;
  if (apiKey === undefined || apiKey === '') return headers;
  switch (type) {
    case 'flow':
      // The contract's Bearer, plus the x-api-key header Langflow documents.
      headers['authorization'] = `Bearer ${apiKey}`;
      headers['x-api-key'] = apiKey;
      break;
    case 'openai':
      headers['authorization'] = `Bearer ${apiKey}`;
      break;
    case 'messages':
      headers['x-api-key'] = apiKey;
      headers['authorization'] = `Bearer ${apiKey}`;
      break;
    case 'generation':
      // Google reads `Authorization: Bearer` as an OAuth access token and
      // rejects an API key there, so the key goes in its own header only.
      headers['x-goog-api-key'] = apiKey;
      break;
    case 'generic':
      // x-api-key per the contract; a custom API may instead expect a Bearer header.
      headers['x-api-key'] = apiKey;
      headers['authorization'] = `Bearer ${apiKey}`;
      break;
  }
  return headers;
}

type Turn = { role: 'user' | 'assistant'; content: string };

/** History then the current message, without empty turns. */
function conversation(req: ConnectorRequest): Turn[] {
  const turns: Turn[] = [];
  for (const turn of req.history ?? []) {
    if ((turn.role === 'user' || turn.role === 'assistant') && typeof turn.content === 'string' && turn.content !== '') {
      turns.push({ role: turn.role, content: turn.content });
    }
  }
  turns.push({ role: 'user', content: req.message });
  return turns;
}

/** Strictly alternating turns starting with the user, as Anthropic and Gemini require: leading assistant turns dropped, neighbours of one role merged. */
function alternating(turns: Turn[]): Turn[] {
  const out: Turn[] = [];
  for (const turn of turns) {
    if (out.length === 0 && turn.role === 'assistant') continue;
    const last = out[out.length - 1];
    if (last !== undefined && last.role === turn.role) last.content = `${last.content}\n\n${turn.content}`;
    else out.push({ ...turn });
  }
  return out;
}

export function buildBody(type: EndpointType, req: ConnectorRequest, model: string, stream: boolean, host: string): Record<string, unknown> {
  switch (type) {
    case 'flow':
      return { input_value: req.message, output_type: 'chat', input_type: 'chat', session_id: req.sessionId };
    case 'generic':
      return { message: req.message, session_id: req.sessionId };
    case 'openai': {
      const messages: Array<{ role: string; content: string }> = [];
      if (req.systemPrompt !== undefined && req.systemPrompt !== '') messages.push({ role: 'system', content: req.systemPrompt });
      messages.push(...conversation(req));
      const body: Record<string, unknown> = { model, messages, temperature: req.temperature ?? DEFAULT_TEMPERATURE };
      if (req.maxTokens !== undefined) body['max_tokens'] = req.maxTokens;
      if (stream) {
        body['stream'] = true;
        // Mistral rejects unknown fields; it reports usage in the last chunk anyway.
        if (host !== 'api.mistral.ai') body['stream_options'] = { include_usage: true };
      }
      return body;
    }
    case 'messages': {
      const body: Record<string, unknown> = {
        model,
        max_tokens: req.maxTokens ?? DEFAULT_MAX_TOKENS,
        messages: alternating(conversation(req)),
      };
      if (req.systemPrompt !== undefined && req.systemPrompt !== '') body['system'] = req.systemPrompt;
      if (req.temperature !== undefined) body['temperature'] = req.temperature;
      if (stream) body['stream'] = true;
      return body;
    }
    case 'generation': {
      const body: Record<string, unknown> = {
        contents: alternating(conversation(req)).map((t) => ({ role: t.role === 'assistant' ? 'model' : 'user', parts: [{ text: t.content }] })),
        generationConfig: { temperature: req.temperature ?? DEFAULT_TEMPERATURE, maxOutputTokens: req.maxTokens ?? DEFAULT_MAX_TOKENS },
      };
      if (req.systemPrompt !== undefined && req.systemPrompt !== '') body['systemInstruction'] = { parts: [{ text: req.systemPrompt }] };
      return body;
    }
  }
}

// ---------------------------------------------------------------------------
// Replies

export interface Extracted {
  text: string;
  usage: AiUsage | null;
}

/** Where each type's text is looked for, for the invalid-response message. */
export const EXPECTED_FIELDS: Record<EndpointType, string> = {
  flow: 'outputs[0].outputs[0].results.message.text',
  openai: 'choices[0].message.content',
  messages: 'content[0].text',
  generation: 'candidates[0].content.parts[].text',
  generic: 'one of response, output, text, message, result',
};

export function invalidResponse(reason: string, detail?: string): AiUpstreamError {
  return coreInvalidResponse('endpoint', reason, detail);
}

export function noTextFound(type: EndpointType): AiUpstreamError {
  return invalidResponse(`the reply has no recognised text field (expected ${EXPECTED_FIELDS[type]})`);
}

/** Text and usage of a complete (non-streamed) JSON reply; throws invalid_response or an upstream error carried in a 2xx body. */
export function extractReply(type: EndpointType, parsed: unknown, excerpt: (text: string) => string): Extracted {
  const text = replyText(type, parsed);
  if (text !== null) return { text, usage: readUsage(type, parsed) };
  const reported = embeddedError(parsed, excerpt);
  if (reported !== null) throw reported;
  throw noTextFound(type);
}

function replyText(type: EndpointType, parsed: unknown): string | null {
  switch (type) {
    case 'flow':
      return flowText(parsed);
    case 'openai':
      return openAiText(parsed);
    case 'messages':
      return anthropicText(parsed);
    case 'generation':
      return geminiText(parsed);
    case 'generic':
      return genericText(parsed);
  }
}

/** Paths, relative to one `outputs[i].outputs[j]` entry, where Langflow versions put the chat text. */
const FLOW_ENTRY_PATHS: Array<Array<string | number>> = [
  ['results', 'message', 'text'],
  ['artifacts', 'message'],
  ['results', 'message', 'data', 'text'],
  ['outputs', 'message', 'message'],
  ['messages', 0, 'message'],
  ['results', 'text', 'text'],
  ['results', 'text', 'data', 'text'],
  ['artifacts', 'text'],
];

/** Langflow run result: outputs[0].outputs[0] first, then every other output entry. */
export function flowText(parsed: unknown): string | null {
  const runs = readPath(parsed, ['outputs']);
  if (!Array.isArray(runs)) return null;
  // Walked in place, not gathered by spreading: an upstream's outputs list of a few hundred thousand entries
  // would overflow the stack as push's arguments.
  for (const run of runs) {
    const outs = readPath(run, ['outputs']);
    if (!Array.isArray(outs)) continue;
    for (const entry of outs) {
      for (const path of FLOW_ENTRY_PATHS) {
        const value = readPath(entry, path);
        if (typeof value === 'string') return value;
      }
    }
  }
  return null;
}

function openAiText(parsed: unknown): string | null {
  const choice = readPath(parsed, ['choices', 0]);
  if (choice === undefined) return null;
  const content = readPath(choice, ['message', 'content']);
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    const parts = content.map((part) => (typeof part === 'string' ? part : readPath(part, ['text'])));
    if (parts.length > 0 && parts.every((p): p is string => typeof p === 'string')) return parts.join('');
  }
  const refusal = readPath(choice, ['message', 'refusal']);
  if (typeof refusal === 'string') return refusal;
  // Legacy completions-style servers.
  const text = readPath(choice, ['text']);
  return typeof text === 'string' ? text : null;
}

function anthropicText(parsed: unknown): string | null {
  const content = readPath(parsed, ['content']);
  if (!Array.isArray(content)) return null;
  const texts = content.filter((block) => readPath(block, ['type']) === 'text' && typeof readPath(block, ['text']) === 'string');
  if (texts.length === 0) return null;
  return texts.map((block) => readPath(block, ['text']) as string).join('');
}

function geminiText(parsed: unknown): string | null {
  const parts = readPath(parsed, ['candidates', 0, 'content', 'parts']);
  if (!Array.isArray(parts)) return null;
  const texts = parts.filter((part) => typeof readPath(part, ['text']) === 'string' && readPath(part, ['thought']) !== true);
  if (texts.length === 0) return null;
  return texts.map((part) => readPath(part, ['text']) as string).join('');
}

const GENERIC_FIELDS = ['response', 'output', 'text', 'message', 'result'] as const;

/** The first of response, output, text, message, result holding text (a string, or an object with text/content/message). */
function genericText(parsed: unknown): string | null {
  if (typeof parsed === 'string') return parsed;
  if (!isRecord(parsed)) return null;
  for (const field of GENERIC_FIELDS) {
    const value = parsed[field];
    if (typeof value === 'string') return value;
    if (isRecord(value)) {
      for (const inner of ['text', 'content', 'message']) {
        if (typeof value[inner] === 'string') return value[inner];
      }
    }
  }
  return null;
}

export function readUsage(type: EndpointType, parsed: unknown): AiUsage | null {
  switch (type) {
    case 'openai':
    case 'generic':
      return readOpenAiUsage(parsed);
    case 'messages':
      return usageOf(readPath(parsed, ['usage', 'input_tokens']), readPath(parsed, ['usage', 'output_tokens']), undefined);
    case 'generation':
      return usageOf(
        readPath(parsed, ['usageMetadata', 'promptTokenCount']),
        readPath(parsed, ['usageMetadata', 'candidatesTokenCount']),
        readPath(parsed, ['usageMetadata', 'totalTokenCount']),
      );
    case 'flow':
      return null;
  }
}

/** An error reported inside a 2xx body (`{error: ...}`, Anthropic `{type: 'error'}`, Gemini prompt blocking, Langflow `{detail}`). */
export function embeddedError(parsed: unknown, excerpt: (text: string) => string): AiUpstreamError | null {
  const raw = reportedErrorText(parsed);
  return raw === null ? null : reportedError('endpoint', excerpt(raw));
}

// ---------------------------------------------------------------------------
// Streams

/** Consumes the decoded stream events of one type and keeps what the final reply needs. */
export abstract class StreamHandler {
  /** True once the upstream said the reply is complete ([DONE], message_stop, end). */
  finished = false;
  /** Whether any event of the expected format was seen. */
  sawData = false;
  usage: AiUsage | null = null;

  constructor(protected readonly excerpt: (text: string) => string) {}

  /** Returns the text delta the event carries, if any; throws AiUpstreamError for an error event. */
  abstract handle(event: string, data: unknown): string | null;

  /** The whole text when the upstream sent it without token events (Langflow without a streaming model). */
  fallbackText(): string | null {
    return null;
  }

  protected reportedError(raw: unknown, fallback: string): AiUpstreamError {
    return reportedError('endpoint', this.excerpt(typeof raw === 'string' ? raw : fallback) || fallback);
  }
}

export function createStreamHandler(type: Exclude<EndpointType, 'generic'>, excerpt: (text: string) => string): StreamHandler {
  switch (type) {
    case 'openai':
      return new OpenAiStream(excerpt);
    case 'messages':
      return new AnthropicStream(excerpt);
    case 'generation':
      return new GeminiStream(excerpt);
    case 'flow':
      return new FlowStream(excerpt);
  }
}

/** `data: {"choices":[{"delta":{"content":...}}]}` chunks, an optional usage chunk, `data: [DONE]`, read as the language model's are. */
class OpenAiStream extends StreamHandler {
  handle(_event: string, data: unknown): string | null {
    const chunk = readOpenAiStreamChunk(data, 'endpoint', this.excerpt);
    if (chunk.kind === 'done') this.finished = true;
    if (chunk.kind !== 'chunk') return null;
    this.sawData = true;
    this.usage = chunk.usage ?? this.usage;
    return chunk.text;
  }
}

/** message_start (input usage), content_block_delta text_delta, message_delta (output usage), message_stop; `error` events. */
class AnthropicStream extends StreamHandler {
  private input: unknown;
  private output: unknown;

  handle(event: string, data: unknown): string | null {
    const type = readPath(data, ['type']) ?? event;
    switch (type) {
      case 'error':
        throw this.reportedError(readPath(data, ['error', 'message']), 'stream error');
      case 'message_start':
        this.sawData = true;
        this.input = readPath(data, ['message', 'usage', 'input_tokens']);
        this.output = readPath(data, ['message', 'usage', 'output_tokens']);
        this.refreshUsage();
        return null;
      case 'content_block_delta': {
        this.sawData = true;
        if (readPath(data, ['delta', 'type']) !== 'text_delta') return null;
        const text = readPath(data, ['delta', 'text']);
        return typeof text === 'string' && text !== '' ? text : null;
      }
      case 'message_delta': {
        this.sawData = true;
        const input = readPath(data, ['usage', 'input_tokens']);
        if (isCount(input)) this.input = input;
        const output = readPath(data, ['usage', 'output_tokens']);
        if (isCount(output)) this.output = output;
        this.refreshUsage();
        return null;
      }
      case 'message_stop':
        this.finished = true;
        return null;
      case 'content_block_start':
      case 'content_block_stop':
        this.sawData = true;
        return null;
      default:
        // ping and future event types.
        return null;
    }
  }

  private refreshUsage(): void {
    this.usage = usageOf(this.input, this.output, undefined) ?? this.usage;
  }
}

/** `alt=sse`: each event is a GenerateContentResponse with a piece of candidates[0].content.parts and the running usageMetadata. */
class GeminiStream extends StreamHandler {
  handle(_event: string, data: unknown): string | null {
    const error = embeddedError(data, this.excerpt);
    if (error !== null) throw error;
    if (!isRecord(data) || !('candidates' in data || 'usageMetadata' in data)) return null;
    this.sawData = true;
    this.usage = readUsage('generation', data) ?? this.usage;
    const text = geminiText(data);
    return text !== null && text !== '' ? text : null;
  }
}

/**
 * Langflow `?stream=true`: `{"event": "add_message" | "token" | "end" | "error", "data": {...}}`
 * objects. Tokens carry `data.chunk`; `end` carries the whole run result in `data.result`.
 */
class FlowStream extends StreamHandler {
  private endText: string | null = null;
  private machineText: string | null = null;

  handle(_event: string, parsed: unknown): string | null {
    const event = readPath(parsed, ['event']);
    const data = readPath(parsed, ['data']);
    switch (event) {
      case 'token': {
        this.sawData = true;
        const chunk = readPath(data, ['chunk']);
        return typeof chunk === 'string' && chunk !== '' ? chunk : null;
      }
      case 'add_message': {
        this.sawData = true;
        const text = readPath(data, ['text']);
        if (readPath(data, ['sender']) !== 'User' && typeof text === 'string' && text !== '') this.machineText = text;
        return null;
      }
      case 'end':
        this.sawData = true;
        this.finished = true;
        this.endText = flowText(readPath(data, ['result']));
        return null;
      case 'error':
        throw this.reportedError(readPath(data, ['error']) ?? readPath(data, ['text']) ?? readPath(data, ['message']), 'the flow failed');
      default:
        return null;
    }
  }

  override fallbackText(): string | null {
    return this.endText ?? this.machineText;
  }
}
