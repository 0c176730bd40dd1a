/**
 * Messages-style chat completions (`POST {base}/v1/messages`, the format of Anthropic's API and the servers
 * that copy it) over the SSRF-guarded client, with native tool use (`tool_use` blocks in, `tool_result`
 * blocks back). Same request and reply shapes as openai-chat.ts, so the answer loop does not care which one
 * runs. Failures are AiUpstreamErrors (source 'language_model'); bodies are only quoted as the core's excerpt.
 */
import type { GuardedHttpClient } from '../http/guarded-client.ts';
import { countTokens } from '../text/tokens.ts';
import { isRecord, parseJson, readPath, redactKey, redactReply, reportedErrorText, requestSecrets, upstreamExcerpt, usageOf } from './core/response.ts';
import { invalidResponse, reportedError, statusError, transportError } from './core/upstream-error.ts';
import type { ChatCompletion, ChatMessage, ChatRequest, ModelToolCall } from './openai-chat.ts';
import { parseUntrustedJson } from '../../../schema/text-input.ts';

const DEFAULT_TIMEOUT_MS = 60_000;
/** The format requires max_tokens; this is used when the knowledge base sets none. */
const DEFAULT_MAX_TOKENS = 1024;
export const MESSAGES_API_VERSION = '2023-06-01';

/** {base}/v1/messages, not doubling a base that already ends in /v1, keeping a full /messages URL. */
export function messagesUrl(baseUrl: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl.trim());
  } catch {
    return baseUrl;
  }
  const path = url.pathname.replace(/\/+$/, '');
  if (/\/messages$/i.test(path)) url.pathname = path;
  else if (/\/v1$/i.test(path)) url.pathname = `${path}/messages`;
  else url.pathname = `${path}/v1/messages`;
  return url.toString();
}

type Block = Record<string, unknown>;

/** The conversation in the messages format: the system prompt apart, tool results as user turns of tool_result blocks. */
export function toMessagesBody(req: ChatRequest): Record<string, unknown> {
  const system = req.messages
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
  const turns: Array<{ role: 'user' | 'assistant'; content: string | Block[] }> = [];
  const push = (role: 'user' | 'assistant', blocks: Block[]) => {
    const last = turns.at(-1);
    // The format wants user and assistant turns to alternate: adjacent turns of one role are merged.
    if (last && last.role === role) last.content = [...(typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content), ...blocks];
    else turns.push({ role, content: blocks });
  };
  for (const m of req.messages as ChatMessage[]) {
    if (m.role === 'system') continue;
    if (m.role === 'tool') push('user', [{ type: 'tool_result', tool_use_id: m.toolCallId, content: m.content }]);
    else if (m.role === 'assistant' && m.toolCalls?.length) {
      push('assistant', [
        ...(m.content ? [{ type: 'text', text: m.content }] : []),
        ...m.toolCalls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: safeInput(c.arguments) })),
      ]);
    } else push(m.role, [{ type: 'text', text: m.content }]);
  }
  const body: Record<string, unknown> = {
    model: req.model,
    max_tokens: req.maxTokens ?? DEFAULT_MAX_TOKENS,
    messages: turns,
  };
  if (system) body.system = system;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.tools?.length) body.tools = req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
  return body;
}

function safeInput(text: string): unknown {
  try {
    const parsed: unknown = parseUntrustedJson(text || '{}');
    return isRecord(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

export async function createMessagesCompletion(http: GuardedHttpClient, req: ChatRequest): Promise<ChatCompletion> {
  const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const secrets = requestSecrets(req.apiKey, req.baseUrl);
  const redact = (text: string) => redactKey(text, secrets);
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', 'anthropic-version': MESSAGES_API_VERSION };
  if (req.apiKey) headers['x-api-key'] = req.apiKey;
  let response;
  try {
    response = await http.request(messagesUrl(req.baseUrl), {
      method: 'POST',
      headers,
      body: JSON.stringify(toMessagesBody(req)),
      timeoutMs,
      ...(req.signal ? { signal: req.signal } : {}),
    });
  } catch (err) {
    throw transportError('language_model', err, timeoutMs, redact);
  }
  const bodyText = response.text();
  if (response.status < 200 || response.status > 299) {
    const retryAfter = response.headers['retry-after'];
    throw statusError('language_model', response.status, upstreamExcerpt(bodyText, secrets), Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
  }
  const json = parseJson(bodyText);
  if (json === undefined) throw invalidResponse('language_model', 'the language-model provider did not return JSON', upstreamExcerpt(bodyText, secrets));
  const content = readPath(json, ['content']);
  if (!Array.isArray(content)) {
    const raw = reportedErrorText(json);
    if (raw !== null) throw reportedError('language_model', upstreamExcerpt(raw, secrets));
    throw invalidResponse('language_model', 'the language-model provider returned no content blocks');
  }
  // A provider that echoes its key (a debugging proxy, a model repeating its prompt) must not hand it to the visitor.
  const text = redactReply(
    content
      .filter((b) => readPath(b, ['type']) === 'text')
      .map((b) => String(readPath(b, ['text']) ?? ''))
      .join(''),
    secrets,
  );
  const toolCalls: ModelToolCall[] = req.tools?.length
    ? content.flatMap((b, index) => {
        if (readPath(b, ['type']) !== 'tool_use') return [];
        const name = readPath(b, ['name']);
        const id = readPath(b, ['id']);
        if (typeof name !== 'string' || name === '') return [];
        return [{ id: typeof id === 'string' && id !== '' ? id : `toolu_${index}`, name, arguments: JSON.stringify(readPath(b, ['input']) ?? {}) }];
      })
    : [];
  const reported = usageOf(readPath(json, ['usage', 'input_tokens']), readPath(json, ['usage', 'output_tokens']), undefined);
  const promptTokens = req.messages.reduce((sum, m) => sum + countTokens(m.content), 0);
  const usage = reported ?? { promptTokens, completionTokens: countTokens(text), totalTokens: promptTokens + countTokens(text) };
  const model = readPath(json, ['model']);
  return { text, usage, usageReported: reported !== null, model: typeof model === 'string' && model ? model : req.model, toolCalls };
}
