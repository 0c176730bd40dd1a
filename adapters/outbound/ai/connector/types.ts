/**
 * Public types of the outbound AI connector: the owner-configured endpoint a
 * chat interface forwards visitor messages to. Its failures are AiUpstreamError (source 'endpoint').
 */
import type { AiUsage } from '../core/response.ts';

/**
 * - 'flow': a flow platform (Langflow, self-hosted or its hosted cloud);
 * - 'openai': OpenAI-compatible chat completions (hosted providers, local model servers);
 * - 'messages': messages-style provider (Anthropic);
 * - 'generation': generation-style provider (Google Gemini);
 * - 'generic': any other JSON API (`{message, session_id}` → `{response}`).
 */
export type EndpointType = 'flow' | 'openai' | 'messages' | 'generation' | 'generic';

export const ENDPOINT_TYPES: readonly EndpointType[] = ['flow', 'openai', 'messages', 'generation', 'generic'];

export interface ConnectorRequest {
  endpointUrl: string;
  apiKey?: string;
  /** Owner override of the type detected from the URL. */
  type?: EndpointType;
  message: string;
  sessionId: string;
  /** Previous turns, oldest first; sent to the chat types only (openai, messages, generation). */
  history?: Array<{ role: 'user' | 'assistant'; content: string }>;
  systemPrompt?: string;
  temperature?: number;
  maxTokens?: number;
  /** Whole exchange, connect to last byte (streams included). Default 30 000. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface ConnectorReply {
  type: EndpointType;
  /** Plain text as the upstream sent it (never interpreted as HTML, never stripped), but for NUL and the API key, redacted. */
  text: string;
  /** HTTP status of the upstream answer. */
  status: number;
  latencyMs: number;
  /** As reported by the upstream; null when it reports none. */
  usage: AiUsage | null;
}

export type ConnectorStreamEvent = { type: 'delta'; text: string } | { type: 'done'; reply: ConnectorReply };
