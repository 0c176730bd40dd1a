import type { AppDeps } from '../context.ts';
import { AppError } from '../../schema/errors.ts';
import { callEndpoint, streamEndpoint } from '../../adapters/ai/connector/connector.ts';
import { ConnectorError, type ConnectorRequest, type EndpointType } from '../../adapters/ai/connector/types.ts';
import { answerQuery, streamAnswer, type Source } from '../knowledge-base/answer.ts';
import { countTokens } from '../knowledge-base/tokens.ts';
import type { KbConfigRow } from '../knowledge-base/repository.ts';

export interface ChatBackendInput {
  endpoint: { url: string; type: EndpointType | null; apiKeyEnc: string | null } | null;
  kb: KbConfigRow | null;
  message: string;
  sessionId: string;
  history: Array<{ role: 'user' | 'assistant'; content: string }>;
  signal?: AbortSignal;
}

export interface ChatBackendReply {
  text: string;
  sources: Source[];
  usage: { promptTokens: number; completionTokens: number; totalTokens: number };
}

/** The connector's failures, as the clear messages the spec names; statuses come from the one mapper. */
export function connectorToAppError(error: unknown): never {
  if (!(error instanceof ConnectorError)) throw error;
  const details = error.detail ? `${error.kind}: ${error.detail}` : error.kind;
  switch (error.kind) {
    case 'timeout':
      throw new AppError('UPSTREAM_TIMEOUT', error.message, details);
    case 'invalid_response':
      throw new AppError('UPSTREAM_INVALID_RESPONSE', error.message, details);
    case 'connection_failed':
    case 'blocked':
      throw new AppError('UPSTREAM_CONNECTION_FAILED', error.message, details);
    default:
      throw new AppError('UPSTREAM_ERROR', error.message, details);
  }
}

function connectorRequest(deps: AppDeps, input: ChatBackendInput): ConnectorRequest {
  const endpoint = input.endpoint!;
  return {
    endpointUrl: endpoint.url,
    apiKey: endpoint.apiKeyEnc ? deps.secrets.open(endpoint.apiKeyEnc) : undefined,
    type: endpoint.type ?? undefined,
    message: input.message,
    sessionId: input.sessionId,
    history: input.history,
    systemPrompt: input.kb?.system_prompt ?? undefined,
    temperature: input.kb?.temperature,
    maxTokens: input.kb?.max_tokens,
    timeoutMs: deps.config.OUTBOUND_TIMEOUT_MS,
    signal: input.signal,
  };
}

const counted = (prompt: string, completion: string) => {
  const promptTokens = countTokens(prompt);
  const completionTokens = countTokens(completion);
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
};

const notConfigured = () => new AppError('SERVICE_UNAVAILABLE', 'This chat interface is not configured to answer yet', 'Give it a knowledge base (configId) or an external endpoint (endpointUrl)');

/** An external endpoint answers when one is configured; otherwise the interface's knowledge base. */
export async function runChatBackend(deps: AppDeps, input: ChatBackendInput): Promise<ChatBackendReply> {
  if (input.endpoint) {
    try {
      const reply = await callEndpoint(deps.http, connectorRequest(deps, input));
      return { text: reply.text, sources: [], usage: reply.usage ?? counted(input.message, reply.text) };
    } catch (error) {
      connectorToAppError(error);
    }
  }
  if (!input.kb) throw notConfigured();
  const result = await answerQuery(deps, input.kb, input.message, { signal: input.signal, history: input.history });
  return { text: result.answer, sources: result.sources, usage: result.usage };
}

export async function* streamChatBackend(deps: AppDeps, input: ChatBackendInput): AsyncGenerator<{ type: 'delta'; text: string } | { type: 'done'; reply: ChatBackendReply }> {
  if (input.endpoint) {
    try {
      for await (const event of streamEndpoint(deps.http, connectorRequest(deps, input))) {
        if (event.type === 'delta') yield event;
        else yield { type: 'done', reply: { text: event.reply.text, sources: [], usage: event.reply.usage ?? counted(input.message, event.reply.text) } };
      }
      return;
    } catch (error) {
      connectorToAppError(error);
    }
  }
  if (!input.kb) throw notConfigured();
  for await (const event of streamAnswer(deps, input.kb, input.message, { signal: input.signal, history: input.history })) {
    if (event.type === 'delta') yield event;
    else if (event.type === 'complete') yield { type: 'done', reply: { text: event.answer, sources: event.sources, usage: event.usage } };
  }
}
