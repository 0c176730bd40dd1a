import type { AppDeps } from '../context.ts';
import { AppError } from '../../schema/errors.ts';
import { callEndpoint, streamEndpoint } from '../../adapters/outbound/ai/connector/connector.ts';
import type { ConnectorRequest, EndpointType } from '../../adapters/outbound/ai/connector/types.ts';
import { rethrowUpstream, visitorUpstreamError } from '../ai-errors.ts';
import {
  answerQuery,
  streamAnswer,
  type AnswerDeps,
  type AnswerOptions,
  type ExecutedToolCall,
  type Source,
  type ToolRunner,
} from '../knowledge-base/answer.ts';
import { countTokens } from '../../adapters/outbound/text/tokens.ts';
import type { KbConfigRow } from '../knowledge-base/repository.ts';

export interface ChatBackendInput {
  endpoint: { url: string; type: EndpointType | null; apiKeyEnc: string | null } | null;
  kb: KbConfigRow | null;
  message: string;
  sessionId: string;
  history: Array<{ role: 'user' | 'assistant'; content: string }>;
  signal?: AbortSignal;
  /** Ties the warning that keeps an upstream's answer (never shown to the visitor) to the request. */
  requestId: string;
  /** Tools the knowledge base's model may call (none for external endpoints, which run their own). */
  tools?: ToolRunner;
}

export interface ChatBackendReply {
  text: string;
  sources: Source[];
  usage: { promptTokens: number; completionTokens: number; totalTokens: number };
  /** The tools the model called, with their results. */
  toolCalls?: ExecutedToolCall[];
  /** Knowledge-base answers: whether a passage matched the words of the question (the dashboard's unanswered count). */
  grounded?: boolean;
}

/** What the chat backend uses: the connector's client and settings, the log, and what answering from a knowledge base uses. */
export type ChatBackendDeps = Pick<AppDeps, 'http' | 'secrets' | 'config' | 'logger'> & AnswerDeps;

/**
 * The visitor holds a key from a public web page, so what the owner's backend or providers printed (tracebacks,
 * internal addresses, their own secrets) stays out of the answer: routers/ai-errors.ts gives the fixed message
 * of the kind, and the log keeps the upstream's answer under the request id.
 */
function visitorAnswerOptions(deps: ChatBackendDeps, input: ChatBackendInput): AnswerOptions {
  return {
    signal: input.signal,
    history: input.history,
    onUpstreamError: (error) => visitorUpstreamError(deps, input.requestId, error),
    ...(input.tools ? { tools: input.tools } : {}),
  };
}

function connectorRequest(deps: Pick<AppDeps, 'secrets' | 'config'>, input: ChatBackendInput): ConnectorRequest {
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

const notConfigured = () =>
  new AppError(
    'SERVICE_UNAVAILABLE',
    'This chat interface is not configured to answer yet',
    'Give it a knowledge base (configId) or an external endpoint (endpointUrl)',
  );

/** An external endpoint answers when one is configured; otherwise the interface's knowledge base. */
export async function runChatBackend(deps: ChatBackendDeps, input: ChatBackendInput): Promise<ChatBackendReply> {
  if (input.endpoint) {
    try {
      const reply = await callEndpoint(deps.http, connectorRequest(deps, input));
      return { text: reply.text, sources: [], usage: reply.usage ?? counted(input.message, reply.text) };
    } catch (error) {
      rethrowUpstream(error, (upstream) => visitorUpstreamError(deps, input.requestId, upstream));
    }
  }
  if (!input.kb) throw notConfigured();
  const result = await answerQuery(deps, input.kb, input.message, visitorAnswerOptions(deps, input));
  return {
    text: result.answer,
    sources: result.sources,
    usage: result.usage,
    grounded: result.grounded,
    ...('toolCalls' in result ? { toolCalls: result.toolCalls } : {}),
  };
}

export async function* streamChatBackend(
  deps: ChatBackendDeps,
  input: ChatBackendInput,
): AsyncGenerator<{ type: 'delta'; text: string } | { type: 'done'; reply: ChatBackendReply }> {
  if (input.endpoint) {
    try {
      for await (const event of streamEndpoint(deps.http, connectorRequest(deps, input))) {
        if (event.type === 'delta') yield event;
        else yield { type: 'done', reply: { text: event.reply.text, sources: [], usage: event.reply.usage ?? counted(input.message, event.reply.text) } };
      }
      return;
    } catch (error) {
      rethrowUpstream(error, (upstream) => visitorUpstreamError(deps, input.requestId, upstream));
    }
  }
  if (!input.kb) throw notConfigured();
  for await (const event of streamAnswer(deps, input.kb, input.message, visitorAnswerOptions(deps, input))) {
    if (event.type === 'delta') yield event;
    else if (event.type === 'complete')
      yield {
        type: 'done',
        reply: {
          text: event.answer,
          sources: event.sources,
          usage: event.usage,
          grounded: event.grounded,
          ...(event.toolCalls ? { toolCalls: event.toolCalls } : {}),
        },
      };
  }
}
